"""``raycluster train [--cluster.*] <lerobot-train flags>``: LeRobot's training under Ray Train."""

from __future__ import annotations

import argparse
import logging
import sys

from raycluster.cluster_config import split_cluster_args

log = logging.getLogger(__name__)


def register(verbs) -> None:
    parser = verbs.add_parser(
        "train",
        help="train a LeRobot policy with Ray Train",
        description="Flags other than --cluster.* go to LeRobot's own parser verbatim, as for lerobot-train. "
        "--cluster.num_workers=N --cluster.use_gpu=true|false --cluster.address=local|auto|HOST:PORT "
        "--cluster.max_failures=N --cluster.cpus_per_worker=C",
    )
    parser.set_defaults(run=run, flags=[])


def run(args: argparse.Namespace) -> int:
    from raycluster.training.interrupt import StopRequest
    from raycluster.training.run import TrainingFailed, TrainingStopped, run_training

    cluster, lerobot_args = split_cluster_args(args.flags)
    stop = StopRequest()
    try:
        run_training(cluster, lerobot_args, stop)
    except TrainingStopped as exc:
        log.warning("%s", exc)
        print(f"raycluster train: {exc}", file=sys.stderr)
        return 128 + exc.signal
    except TrainingFailed as exc:
        log.error("%s", exc)
        print(f"raycluster train: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0
