"""The run's end on the driver: its summary made and written (beside the output and in the model dir), this
start added to the job's ledger, the outcome logged, and a run that stopped early or lost its newest checkpoint
raised as such."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import fields
from pathlib import Path

from raycluster.cluster_config import ClusterConfig
from raycluster.ledger import keep_start, ledger_path, start_entry
from raycluster.lerobot.api import LAST, PRETRAINED_MODEL, checkpoints_dir
from raycluster.training.interrupt import StopRequest
from raycluster.training.phases import Timeline, say
from raycluster.training.summary import Measured, RunSummary
from raycluster.training.worker.config import WorkerResult
from raycluster.training.worker.recorder import LOSS_WINDOW

log = logging.getLogger(__name__)


class TrainingFailed(Exception):
    """The Ray Train run ended in an error; the message says which and where."""


class TrainingStopped(Exception):
    """A signal stopped the run before its last step; the message says at which step and what was saved."""

    def __init__(self, message: str, signal: int):
        super().__init__(message)
        self.signal = signal


def summarize(
    result: WorkerResult,
    output_dir: Path,
    restarts: int,
    times: Timeline,
    stopped_by: str | None,
    curves,
    evals: dict,
    ledger,
) -> RunSummary:
    measured = {f.name: getattr(result, f.name) for f in fields(Measured)}
    return RunSummary(
        **measured,
        steps=result.steps,
        restarts=restarts,
        wall_s=times.phases["summary_written"],
        phases=times.phases,
        recoveries=times.recoveries,
        effective_batch_size=result.batch_size * result.world_size,
        output_dir=str(output_dir),
        stopped_by=stopped_by if result.interrupted_at is not None else None,
        curves=curves,
        evaluations=evals["evaluations"],
        best=evals["best"],
        ledger=ledger,
    )


def kept_ledger(cluster: ClusterConfig, output_dir: Path, started: float, times: Timeline, steps: list) -> dict | None:
    """This start added to the job's ledger, kept beside the checkpoints."""
    entry = start_entry(
        cluster.started_at or started, started, times.phases, times.recoveries, steps, cluster.environment_s
    )
    scratch = Path(cluster.staging_dir) if cluster.staging_dir else None
    return keep_start(ledger_path(cluster.checkpoint_dir, output_dir), entry, scratch)


def report(summary: RunSummary, cluster: ClusterConfig, result: WorkerResult, stop: StopRequest) -> None:
    """Write the summary, log the outcome, and raise if the run stopped early or lost its newest checkpoint."""
    output_dir = Path(summary.output_dir)
    path = summary.write(output_dir)
    if cluster.model_dir:
        summary.write(Path(cluster.model_dir))
    if summary.curves:
        log.info("curves: %s; the dashboard: raycluster curves %s", summary.curves, output_dir)
        if cluster.model_dir:
            shutil.copy2(summary.curves, Path(cluster.model_dir) / Path(summary.curves).name)
    log.info(
        "done: step %s/%s, loss %.4f -> %.4f (mean of the first and last %d steps), %.1f samples/s, "
        "checkpoints %s, %.1fs; summary at %s",
        summary.final_step,
        summary.steps,
        summary.loss_first or float("nan"),
        summary.loss_last or float("nan"),
        LOSS_WINDOW,
        summary.samples_per_s or 0.0,
        summary.checkpoints,
        summary.wall_s,
        path,
    )
    say(summary.phases, summary.recoveries)
    if summary.stopped_by:
        step = result.interrupted_at
        log.info(
            "%s: stopped after step %d, saved and published %.1fs after the signal",
            summary.stopped_by,
            step,
            time.monotonic() - stop.asked_at,
        )
        why = result.lost or "no checkpoint was written (--save_checkpoint=false?)"
        saved = f"checkpoint {step} saved" if step in summary.checkpoints else f"checkpoint {step} NOT saved: {why}"
        raise TrainingStopped(f"stopped by {summary.stopped_by} at step {step}; {saved}", stop.signal)
    if result.lost:
        # Training went on meanwhile, but a run whose newest checkpoint is not where it must be is no success.
        raise TrainingFailed(result.lost)
    if summary.checkpoints:
        log.info(
            "trained policy: %s (LeRobot loads it with <Policy>.from_pretrained(path))",
            checkpoints_dir(output_dir) / LAST / PRETRAINED_MODEL,
        )
