"""``raycluster train`` and ``jobs/train_lerobot.py``: the flags in, one line and an exit code out
(0, 1 failed, 2 bad flags, 128+N stopped by signal N), and the same as a ``JobReport`` for a submitter."""

from __future__ import annotations

import logging
import os
import sys

from raycluster.cluster_config import split_cluster_args
from raycluster.errors import UsageError
from raycluster.faults import Faults
from raycluster.job_report import JobReport, write_report

log = logging.getLogger(__name__)


def train(argv: list[str]) -> int:
    from raycluster.training.driver.outcome import TrainingFailed, TrainingStopped
    from raycluster.training.driver.run import run_training
    from raycluster.training.interrupt import StopRequest

    try:
        cluster, lerobot_args = split_cluster_args(argv)
        # The one place a run reads the faults a test injects (a simulated job's hosts get them from the sim).
        run_training(cluster, lerobot_args, StopRequest(), Faults.from_env(os.environ))
    except UsageError as exc:
        return ended(2, f"error: {exc}", log.error)
    except TrainingStopped as exc:
        return ended(128 + exc.signal, str(exc), log.warning)
    except TrainingFailed as exc:
        return ended(1, str(exc).splitlines()[0], log.error)
    write_report(JobReport(0, None))
    return 0


def ended(code: int, reason: str, say) -> int:
    say("%s", reason)
    print(f"raycluster train: {reason}", file=sys.stderr)
    write_report(JobReport(code, reason))
    return code
