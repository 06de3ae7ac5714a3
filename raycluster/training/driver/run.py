"""The driver of a training run: reads the flags (without importing LeRobot), builds a TorchTrainer, runs it, writes the summary.

``raycluster train`` and ``jobs/train_lerobot.py`` both come here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import ray
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

from raycluster.checkpoints.roots import open_store
from raycluster.cluster_config import ClusterConfig
from raycluster.connect import check_capacity, ray_cluster
from raycluster.curves.keeper import curves_for_run, finish_curves
from raycluster.errors import UsageError
from raycluster.evals.best import finish_evals
from raycluster.evals.plan import inline_off, plan_for_run
from raycluster.faults import NO_FAULTS, Faults
from raycluster.ledger import process_started
from raycluster.lerobot.api import flag_value, resumed_step
from raycluster.lerobot.dataset import check_dataset_root
from raycluster.lerobot.flags import TrainFlags, read_flags
from raycluster.lerobot.lines import installed_line
from raycluster.training.driver.causes import failure_cause
from raycluster.training.driver.keepers import RunKeepers, keepers_for_run, publish_model
from raycluster.training.driver.outcome import TrainingFailed, kept_ledger, report, summarize
from raycluster.training.driver.paths import absolute_paths, pinned_output_dir
from raycluster.training.driver.ray_train_env import set_ray_train_defaults
from raycluster.training.interrupt import StopRequest, fit_listening, forward_to_journal
from raycluster.training.journal import RunJournal
from raycluster.training.phases import FailureSeen, Phase, mark_phases, timeline
from raycluster.training.summary import RunSummary
from raycluster.training.watch.watchdog import Allowances, watch_for_hangs
from raycluster.training.worker.config import WorkerConfig, WorkerResult
from raycluster.training.worker.flags_check import Refused
from raycluster.training.worker.loop import train_loop_per_worker

log = logging.getLogger(__name__)


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


def prepare_lerobot_args(cluster: ClusterConfig, args: list[str], resuming: bool, cwd: Path):
    """LeRobot's flags as the installed line takes them with ours, what the driver needs of them, and the output
    dir pinned so that every worker (and this driver) agree on it even when LeRobot would have made one up from
    the clock. Nothing here imports LeRobot (~8 s): LeRobot parses and validates the flags on the ranks, before
    their first step (``worker/flags_check.py``); what can be refused without it is refused here, before any
    cluster starts. A run that will resume from the keeper's checkpoint may find its output dir there."""
    cluster.check_outputs()
    args = installed_line().plan_args(args, cluster.line())
    if cluster.async_eval:  # every checkpoint is evaluated apart instead (raycluster/evals)
        args = inline_off(args)
    resumed_step(args)  # a --config_path we could not read a step from: refused before any cluster starts
    flags = read_flags(args, dt.datetime.now())
    if not flag_value(args, "output_dir"):  # pinned; made absolute here, as Ray Train's workers run elsewhere
        flags = dataclasses.replace(flags, output_dir=pinned_output_dir(flags.output_dir, cwd))
        args = [*args, f"--output_dir={flags.output_dir}"]
    if not (resuming or flags.resume) and Path(flags.output_dir).is_dir():
        raise UsageError(
            f"--output_dir={flags.output_dir} already exists and --resume is not true: give a new --output_dir "
            "(nothing in this one was touched)"
        )
    if flags.dataset_root is not None:
        check_dataset_root(Path(flags.dataset_root))
    return flags, args, plan_for_run(cluster.evals(), flags)


def make_trainer(
    cluster: ClusterConfig,
    flags: TrainFlags,
    args: list[str],
    journal,
    keepers: RunKeepers,
    curves,
    board,
) -> TorchTrainer:
    """Ray Train's TorchTrainer over ``train_loop_per_worker``, publishing through the run's keepers."""
    worker = WorkerConfig(
        args,
        cluster.use_gpu,
        cluster.mixed_precision,
        journal,
        line_settings=cluster.line(),
        checkpoint_keeper=keepers.checkpoints,
        part_stores=keepers.part_stores,
        curves=curves,
        sharding=cluster.sharding,
        progress=board,
        beats_every_s=Allowances.for_timeout(cluster.hang_timeout_s).beats_every_s(),
    )
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
            name=f"{flags.job_name}-{Path(flags.output_dir).resolve().name}",
            failure_config=FailureConfig(max_failures=cluster.max_failures),
            callbacks=[FailureSeen(journal)],
        ),
    )


class RunRefused(UsageError):
    """LeRobot refused the flags on the ranks: nothing was trained or written."""


def trained(trainer: TorchTrainer, stop: StopRequest, curves) -> WorkerResult:
    """Rank 0's result; LeRobot's refusal of the flags on the ranks as ``RunRefused``, the curves keeper (which
    has nothing to publish then) ended first."""
    result: WorkerResult | Refused = fit_listening(trainer, stop).return_value
    if isinstance(result, Refused):
        if curves is not None:
            ray.kill(curves)
        raise RunRefused(result.reason)
    return result


def run_training(
    cluster: ClusterConfig, lerobot_args: list[str], stop: StopRequest | None = None, faults: Faults = NO_FAULTS
) -> RunSummary:
    """``stop``: set by the caller's signal handlers; every rank then stops after one agreed step, which LeRobot
    saves as a periodic checkpoint and the keeper publishes (``TrainingStopped``). ``faults``: a test's, if any."""
    stop = stop or StopRequest()
    started = process_started()
    cluster, lerobot_args = absolute_paths(cluster, lerobot_args, Path.cwd())
    resuming = bool(cluster.checkpoint_dir) and has_complete_checkpoint(cluster.checkpoint_dir)
    flags, args, plan = prepare_lerobot_args(cluster, lerobot_args, resuming, Path.cwd())
    recorded = [Phase("flags_checked", time.time(), 0)]
    # Checkpoints are assembled beside the keepers, on this node: in a directory of this run's unless given.
    with ray_cluster(cluster.address), staging_dir(cluster.staging_dir) as staging:
        recorded.append(Phase("cluster_ready", time.time(), 0))
        check_capacity(cluster.num_workers, cluster.use_gpu, cluster.cpus_per_worker)
        journal = RunJournal.remote()
        output_dir = Path(flags.output_dir).resolve()
        curves = curves_for_run(cluster, output_dir, staging)
        # The stacks' file beside the summary: the model dir first, which SageMaker keeps (its output dir is scratch).
        kept = [Path(cluster.model_dir)] if cluster.model_dir else []
        board = watch_for_hangs(cluster.hang_timeout_s, [*kept, output_dir], journal)
        keepers = keepers_for_run(cluster, plan, staging, curves, faults)
        trainer = make_trainer(cluster, flags, args, journal, keepers, curves, board[0] if board else None)
        fitted = threading.Event()
        forward_to_journal(stop, journal, fitted)
        if board:
            board[1].start(fitted)
        try:
            result = trained(trainer, stop, curves)
            recorded.append(Phase("training_returned", time.time(), 0))
            stopped = result.interrupted_at is not None
            evals = finish_evals(keepers.evals, stopped, cluster.eval_timeout_s)  # those still running, waited for
            recorded += [Phase("evaluations_done", time.time(), 0), *ray.get(journal.phases.remote(), timeout=60)]
            evals = publish_model(evals, keepers, cluster, stopped, staging, faults)
            mark_phases(curves, recorded, started)
        except RunRefused:
            curves = None  # ended: nothing to finish
            raise
        except Exception as exc:
            raise TrainingFailed(f"training failed: {failure_cause(exc, journal)}") from exc
        finally:
            fitted.set()
            png = finish_curves(curves)
        attempts, steps = ray.get([journal.attempts.remote(), journal.attempt_steps.remote()], timeout=60)
    recorded.append(Phase("summary_written", time.time(), 0))
    times = timeline(recorded, started)
    ledger = kept_ledger(cluster, output_dir, started, times, steps)
    summary = summarize(result, output_dir, attempts - 1, times, stop.name, png, evals, ledger)
    report(summary, cluster, result, stop)
    return summary
