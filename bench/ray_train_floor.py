"""Ray Train's own start on a running cluster, with nothing of raycluster's or LeRobot's in it: a driver connects
to the cluster and runs a ``TorchTrainer`` whose train function does nothing but note when it began, with the
same workers, resources and Ray Train settings as ``raycluster train``. Its first line, in seconds since the
command started, is the floor under any run that builds on Ray Train's worker group; ``bench/training.py``
prints it beside torchrun's first step.

Run as ``python bench/ray_train_floor.py ADDRESS WORKERS``; prints ``FLOOR {"first_line": s, "fit": s}``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

STARTED = time.time()

import ray  # noqa: E402  (the imports are part of what a driver pays, so the clock starts before them)
from ray.train import RunConfig, ScalingConfig  # noqa: E402
from ray.train.torch import TorchTrainer  # noqa: E402

from raycluster.training.driver.ray_train_env import set_ray_train_defaults  # noqa: E402


def noted(config: dict) -> dict:
    """The train function: when it began, nothing else."""
    return {"began": time.time()}


def main() -> None:
    address, workers = sys.argv[1], int(sys.argv[2])
    ray.init(address=address, logging_level="WARNING")
    set_ray_train_defaults(os.environ)
    with tempfile.TemporaryDirectory(prefix="ray-train-floor-") as storage:
        fit_at = time.time()
        result = TorchTrainer(
            noted,
            scaling_config=ScalingConfig(num_workers=workers, resources_per_worker={"CPU": 1}),
            run_config=RunConfig(name="ray-train-floor", storage_path=storage),
        ).fit()
    began = result.return_value["began"]
    print("FLOOR " + json.dumps({"first_line": began - STARTED, "fit": began - fit_at}), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
