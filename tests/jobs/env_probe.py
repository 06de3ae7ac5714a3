"""A Ray job script of the tests' own: every rank of a TorchTrainer, one per host, says whether it sees each
variable named in PROBE_NAMES (a secret by a hash of its value, never the value), then waits for the test to
have looked at the dashboard (PROBE_RELEASE, a file) before the job ends. A rank that misses one fails."""

import hashlib
import os
import socket
import time

# Every rank's line at once: Ray's log deduplication, which is read when ray is imported, would hold a line that
# differs from another rank's only in numbers until the job ends, and the test waits for each rank's line.
os.environ["RAY_DEDUP_LOGS"] = "0"

import ray  # noqa: E402
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def rank_sees(config: dict) -> None:
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    seen = {name: os.environ.get(name) for name in config["names"]}
    said = " ".join(f"{k}=#{hashlib.sha256(v.encode()).hexdigest()[:12]}" for k, v in seen.items() if v is not None)
    print(f"probe: rank {rank} on {socket.gethostname()} sees {said}", flush=True)
    missing = [name for name, value in seen.items() if value is None]
    if missing:
        raise RuntimeError(f"rank {rank} on {socket.gethostname()} misses {missing}")
    deadline = time.monotonic() + 120
    while not os.path.exists(config["release"]) and time.monotonic() < deadline:
        time.sleep(0.5)


if __name__ == "__main__":
    ray.init()
    hosts = len([n for n in ray.nodes() if n["Alive"]])
    config = {"names": os.environ["PROBE_NAMES"].split(","), "release": os.environ["PROBE_RELEASE"]}
    TorchTrainer(
        rank_sees,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=hosts, placement_strategy="STRICT_SPREAD"),
        run_config=RunConfig(name="env-probe"),
    ).fit()
    print("probe: every rank saw every name")
