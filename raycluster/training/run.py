"""The driver of a training run: checks the flags, builds a TorchTrainer, runs it, writes the summary.

``raycluster train`` and ``jobs/train_lerobot.py`` both come here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import ray
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

from raycluster.checkpoints.store import open_store
from raycluster.cluster_config import ClusterConfig
from raycluster.connect import check_capacity, ray_cluster
from raycluster.curves.keeper import curves_for_run, finish_curves
from raycluster.dataset import check_dataset_root
from raycluster.evals.plan import inline_off, plan_for_run
from raycluster.faults import NO_FAULTS, Faults
from raycluster.ledger import keep_start, ledger_path, process_started, start_entry
from raycluster.training.causes import failure_cause
from raycluster.training.interrupt import StopRequest, fit_listening, forward_to_journal
from raycluster.training.journal import RunJournal
from raycluster.training.keepers import RunKeepers, evaluated, keepers_for_run
from raycluster.training.lerobot_api import (
    LAST,
    PRETRAINED_MODEL,
    checkpoints_dir,
    flag_value,
    parse_train_config,
    resumed_step,
)
from raycluster.training.lerobot_lines import installed_line
from raycluster.training.paths import absolute_paths
from raycluster.training.phases import FailureSeen, Phase, Timeline, mark_phases, say, timeline
from raycluster.training.ray_train_env import set_ray_train_defaults
from raycluster.training.recorder import LOSS_WINDOW
from raycluster.training.summary import Measured, RunSummary
from raycluster.training.watchdog import Allowances, watch_for_hangs
from raycluster.training.worker import WorkerConfig, WorkerResult, train_loop_per_worker

log = logging.getLogger(__name__)


class TrainingFailed(Exception):
    """The Ray Train run ended in an error; the message says which and where."""


class TrainingStopped(Exception):
    """A signal stopped the run before its last step; the message says at which step and what was saved."""

    def __init__(self, message: str, signal: int):
        super().__init__(message)
        self.signal = signal


def has_complete_checkpoint(root: str) -> bool:
    store = open_store(root)
    return any(store.problems(name) is None for name in store.names())


@contextlib.contextmanager
def staging_dir(given: str) -> Iterator[str]:
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="raycluster-staging-", ignore_cleanup_errors=True) as made:
        yield made


def prepare_lerobot_args(cluster: ClusterConfig, args: list[str], resuming: bool):
    """Validate LeRobot's flags here, before any cluster starts, as the installed LeRobot line takes them
    with ours, and pin the output dir so that every worker (and this driver) agree on it even when LeRobot
    would have made one up from the clock. A run that will resume from the keeper's checkpoint is only
    parsed: its output dir may exist, and LeRobot validates the saved config when it resumes."""
    line = installed_line()
    args = line.plan_args(args, cluster)
    if cluster.async_eval:  # every checkpoint is evaluated apart instead (raycluster/evals)
        args = inline_off(args)
    resumed_step(args)  # a --config_path we could not read a step from: refused before any cluster starts
    cfg = parse_train_config(args, validate=not resuming)
    line.check_config(cfg, cluster)
    if cfg.dataset is not None and cfg.dataset.root is not None:
        check_dataset_root(Path(cfg.dataset.root))
    if flag_value(args, "output_dir") is None:
        args = [*args, f"--output_dir={cfg.output_dir}"]
    return cfg, args, plan_for_run(cluster, cfg)


def make_trainer(
    cluster: ClusterConfig, cfg, args: list[str], journal, keepers: RunKeepers, curves, board
) -> TorchTrainer:
    """Ray Train's TorchTrainer over ``train_loop_per_worker``, publishing through the run's keepers."""
    worker = WorkerConfig(
        args, cluster.use_gpu, cluster.mixed_precision, journal, checkpoint_keeper=keepers.checkpoints,
        part_stores=keepers.part_stores, model_keeper=keepers.model, curves=curves, sharding=cluster.sharding,
        progress=board, beats_every_s=Allowances.for_timeout(cluster.hang_timeout_s).beats_every_s(),
    )  # fmt: skip
    set_ray_train_defaults(os.environ)
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config=vars(worker),
        scaling_config=ScalingConfig(
            num_workers=cluster.num_workers,
            use_gpu=cluster.use_gpu,
            resources_per_worker=None if cluster.use_gpu else {"CPU": cluster.cpus_per_worker},
        ),
        run_config=RunConfig(
            name=f"{cfg.job_name}-{Path(cfg.output_dir).resolve().name}",
            failure_config=FailureConfig(max_failures=cluster.max_failures),
            callbacks=[FailureSeen(journal)],
        ),
    )


def summarize(
    result: WorkerResult, cfg, restarts: int, times: Timeline, stopped_by: str | None, curves, evals: dict, ledger
) -> RunSummary:
    measured = {f.name: getattr(result, f.name) for f in fields(Measured)}
    return RunSummary(
        **measured,
        steps=cfg.steps,
        restarts=restarts,
        wall_s=times.phases["summary_written"],
        phases=times.phases,
        recoveries=times.recoveries,
        effective_batch_size=cfg.batch_size * result.world_size,
        output_dir=str(Path(cfg.output_dir).resolve()),
        stopped_by=stopped_by if result.interrupted_at is not None else None,
        curves=curves,
        evaluations=evals["evaluations"],
        best=evals["best"],
        ledger=ledger,
    )


def kept_ledger(cluster: ClusterConfig, output_dir: Path, started: float, times: Timeline, steps: list) -> dict | None:
    """This start added to the job's ledger, kept beside the checkpoints."""
    entry = start_entry(cluster.started_at or started, started, times.phases, times.recoveries, steps)
    scratch = Path(cluster.staging_dir) if cluster.staging_dir else None
    return keep_start(ledger_path(cluster.checkpoint_dir, output_dir), entry, scratch)


def run_training(
    cluster: ClusterConfig, lerobot_args: list[str], stop: StopRequest | None = None, faults: Faults = NO_FAULTS
) -> RunSummary:
    """``stop``: set by the caller's signal handlers; every rank then stops after one agreed step, which LeRobot
    saves as a periodic checkpoint and the keeper publishes (``TrainingStopped``). ``faults``: a test's, if any."""
    stop = stop or StopRequest()
    started = process_started()
    cluster, lerobot_args = absolute_paths(cluster, lerobot_args, Path.cwd())
    resuming = bool(cluster.checkpoint_dir) and has_complete_checkpoint(cluster.checkpoint_dir)
    cfg, args, plan = prepare_lerobot_args(cluster, lerobot_args, resuming)
    recorded = [Phase("flags_checked", time.time(), 0)]
    log.info(
        "effective batch = batch_size %d x world_size %d x grad_accum 1 = %d samples per step",
        cfg.batch_size,
        cluster.num_workers,
        cfg.batch_size * cluster.num_workers,
    )
    # Checkpoints are assembled beside the keepers, on this node: in a directory of this run's unless given.
    with ray_cluster(cluster.address), staging_dir(cluster.staging_dir) as staging:
        recorded.append(Phase("cluster_ready", time.time(), 0))
        check_capacity(cluster.num_workers, cluster.use_gpu, cluster.cpus_per_worker)
        journal = RunJournal.remote()
        output_dir = Path(cfg.output_dir).resolve()
        curves = curves_for_run(cluster, output_dir, staging)
        # The stacks' file beside the summary: the model dir first, which SageMaker keeps (its output dir is scratch).
        kept = [Path(cluster.model_dir)] if cluster.model_dir else []
        board = watch_for_hangs(cluster.hang_timeout_s, [*kept, output_dir], journal)
        keepers = keepers_for_run(cluster, plan, staging, curves, faults)
        trainer = make_trainer(cluster, cfg, args, journal, keepers, curves, board[0] if board else None)
        fitted = threading.Event()
        forward_to_journal(stop, journal, fitted)
        if board:
            board[1].start(fitted)
        try:
            result: WorkerResult = fit_listening(trainer, stop).return_value
            recorded += [Phase("training_returned", time.time(), 0), *ray.get(journal.phases.remote(), timeout=60)]
            evals = evaluated(keepers, cluster, result.interrupted_at is not None, staging)
            mark_phases(curves, recorded, started)
        except Exception as exc:
            raise TrainingFailed(f"training failed: {failure_cause(exc, journal)}") from exc
        finally:
            fitted.set()
            png = finish_curves(curves)
        attempts, steps = ray.get([journal.attempts.remote(), journal.attempt_steps.remote()], timeout=60)
    recorded.append(Phase("summary_written", time.time(), 0))
    times = timeline(recorded, started)
    ledger = kept_ledger(cluster, output_dir, started, times, steps)
    summary = summarize(result, cfg, attempts - 1, times, stop.name, png, evals, ledger)
    report(summary, cluster, result, stop)
    return summary


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
