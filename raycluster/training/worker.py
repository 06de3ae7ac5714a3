"""What each Ray Train worker runs: an Accelerator over Ray's process group, then LeRobot's own ``train``."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import ray.train.torch
import torch.distributed as dist

from raycluster.checkpoints.transfer import send_directory
from raycluster.training import lerobot_api
from raycluster.training.curve_hooks import CurveHooks
from raycluster.training.interrupt import Interrupted, StopAgreement
from raycluster.training.lerobot_api import checkpoints_dir, newest_checkpoint, parse_train_config
from raycluster.training.lerobot_lines import Placement, installed_line
from raycluster.training.log_lines import rank_logging
from raycluster.training.phases import LoopPhases, Phase
from raycluster.training.progress import PUBLISHING, STARTING, ProgressBeacon, rank_beacon
from raycluster.training.recorder import StepRecorder
from raycluster.training.resume import ANSWER_S, CHECK_S, Start, agree_on_start, final_checkpoint
from raycluster.training.shipping import Shipper, checkpoint_shipping, outcome
from raycluster.training.stacks import answer_stack_requests
from raycluster.training.summary import Measured
from raycluster.training.tracker import TrackerEnd

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    lerobot_args: list[str]
    use_gpu: bool
    mixed_precision: str
    journal: object
    """RunJournal actor handle."""
    checkpoint_keeper: object | None = None
    """CheckpointKeeper owning --cluster.checkpoint_dir, when set."""
    part_stores: dict | None = None
    """Node id -> that node's PartStore of --cluster.checkpoint_dir, when set."""
    model_keeper: object | None = None
    """CheckpointKeeper that receives the final pretrained_model, when --cluster.model_dir is set."""
    curves: object | None = None
    """CurveKeeper that records the run's curves, unless --cluster.track=none (or trackio is missing)."""
    sharding: str = "none"
    """--cluster.sharding: the parallelism degrees each rank fills in from where the ranks landed."""
    progress: object | None = None
    """ProgressBoard the watchdog reads, unless --cluster.hang_timeout_s=0."""
    beats_every_s: float = 5.0


@dataclass(frozen=True, kw_only=True)
class WorkerResult(Measured):
    """What rank 0 returns to the driver (Ray Train's ``Result.return_value``)."""

    lost: str | None = None
    """Why the newest checkpoint is not in the checkpoint root, when it is not."""
    interrupted_at: int | None = None
    train_s: float = 0.0


def worker_group() -> str:
    """This rank's worker group, which Ray Train starts anew at every attempt: its placement group's id."""
    group = ray.util.get_current_placement_group()
    if group is None:  # Ray Train places every worker in its group's placement group
        raise RuntimeError("a training worker outside any placement group: not started by Ray Train")
    return group.id.hex()


def local_part_store(part_stores: dict | None):
    """This node's part store, of ``part_stores`` (node id -> part store), when there is one."""
    return (part_stores or {}).get(ray.get_runtime_context().get_node_id())


def saved_checkpoints(worker: WorkerConfig, output_dir: Path, shipper: Shipper | None) -> tuple[list[str], str | None]:
    """The keeper's complete checkpoints (or this node's, without a keeper), and why the newest local one
    is missing from them, if it is."""
    if worker.checkpoint_keeper is None:
        return sorted(p.name for p in checkpoints_dir(output_dir).glob("[0-9]*") if p.is_dir()), None
    shipper.drain()
    newest = newest_checkpoint(output_dir)
    why = outcome(worker.checkpoint_keeper, newest.name) if newest is not None else None
    published = ray.get(worker.checkpoint_keeper.complete_names.remote(), timeout=CHECK_S)  # a manifest check each
    if newest is None or newest.name in published:
        return published, None
    why = shipper.failed.get(newest.name) or why or "its upload never completed"
    return published, f"checkpoint {newest.name} was not published to the checkpoint root: {why}"


def publish_all(worker: WorkerConfig, output_dir: Path, shipper: Shipper | None, final: bool):
    """Rank 0's end: every checkpoint published (waited for), then the final model unless the run was
    interrupted (it has none); the published checkpoints and why the newest is missing, if it is."""
    published, lost = saved_checkpoints(worker, output_dir, shipper)
    if worker.model_keeper is not None and final:
        publish_model(worker, output_dir, published if worker.checkpoint_keeper is not None else [])
    return published, lost


def publish_model(worker: WorkerConfig, output_dir: Path, published: list[str]) -> None:
    final = final_checkpoint(worker.checkpoint_keeper, output_dir, published, local_part_store(worker.part_stores))
    if final is None:
        log.warning("no checkpoint was saved (--save_checkpoint=false?): nothing to publish to the model dir")
    else:
        send_directory(worker.model_keeper, final / lerobot_api.PRETRAINED_MODEL, lerobot_api.PRETRAINED_MODEL)


def uploads_failed(worker: WorkerConfig, shipper: Shipper | None) -> dict[str, str]:
    """Every checkpoint that was not published, with its cause: this host's own, and the keeper's word on
    every other (a part of another host that failed, or never came)."""
    if shipper is None:
        return {}
    return {**ray.get(worker.checkpoint_keeper.failures_by_name.remote(), timeout=ANSWER_S), **shipper.failed}


def rank_hosts(node: str, rank: int, world_size: int) -> list[str]:
    """Every rank's host, by rank; rank 0 logs them as blocks (a shard group must not span two hosts)."""
    hosts: list[str | None] = [None] * world_size
    dist.all_gather_object(hosts, node)
    if rank == 0:
        blocks = [
            f"{host}: {hosts.index(host)}-{len(hosts) - 1 - hosts[::-1].index(host)}" for host in dict.fromkeys(hosts)
        ]
        log.info("ranks by host: %s", ", ".join(blocks))
    return hosts


def begin(worker: WorkerConfig, rank: int, local_rank: int, world_size: int):
    """This rank's start: its beats from its first line (as its worker group's number, the journal's word, asked
    before any collective), so a rank stuck importing LeRobot, in the first collective or fetching the checkpoint
    it resumes from is watched; LeRobot's flags read; where every rank starts, agreed.
    (the installed LeRobot line, its config, the ``Start``, the beacon or None)"""
    beacon = None
    if worker.progress is not None:
        group = ray.get(worker.journal.group_of.remote(worker_group()), timeout=ANSWER_S)
        beacon = rank_beacon(worker.progress, rank, group, world_size, worker.beats_every_s)
    line = installed_line()
    cfg = parse_train_config(worker.lerobot_args, validate=False)
    keeper, part_store = worker.checkpoint_keeper, local_part_store(worker.part_stores)
    start = agree_on_start(worker.lerobot_args, keeper, part_store, worker.journal, cfg, rank, local_rank, world_size)
    if beacon is not None:
        beacon.now(STARTING)  # agreed (the checkpoint resumed from in place): LeRobot's set-up begins
    return line, cfg, start, beacon


def loop_hooks(worker: WorkerConfig, cfg, rank: int, world_size: int, device, start: Start, shipping, beacon):
    """Everything that watches LeRobot's loop on this rank: the step recorder, the stop agreement, the beacon
    (told where LeRobot validates), the checkpoint shipper where this rank ships a part (rank 0 always), and the
    curves (with the attempt's restart and resume marked)."""
    recorder = StepRecorder(cfg.batch_size * world_size, max(cfg.log_freq, 1), ray.train.report)
    agreement = StopAgreement(worker.journal, device, polls=rank == 0)
    hooks, shipper, curves = [recorder, agreement], None, worker.curves
    if beacon is not None:
        beacon.validating_at(lerobot_api.validations(cfg))
        hooks.append(beacon)
    if rank == 0:
        hooks.append(LoopPhases(worker.journal.phase.remote, start.attempt, worker.journal.reached.remote))
    if shipping is not None:
        shipper = shipping[0]
        hooks.append(shipping[1])
    if curves is not None:
        hooks.append(CurveHooks(curves, rank, device))
        if rank == 0 and start.attempt > 1:
            curves.mark.remote(start.resumed_from or 0, "restart", {"attempt": float(start.attempt)})
        if rank == 0 and start.resumed_from is not None:
            curves.mark.remote(start.resumed_from, "resume")
    return recorder, shipper, hooks


def run_loop(line, cfg, args, placement: Placement, hooks: list, rank: int, curves, tracker: TrackerEnd) -> int | None:
    """LeRobot's own ``train``, watched by ``hooks``; the step it stopped at when it was asked to stop."""
    stopped = failed = False
    try:
        with lerobot_api.hooked(hooks):
            line.train(cfg, args, placement)
    except Interrupted as stop:
        stopped = True
        log.info("rank %d: stopped on request after step %d", rank, stop.step)
        if rank == 0 and curves is not None:
            curves.mark.remote(stop.step, "interrupted")
        return stop.step
    except BaseException:
        failed = True
        raise
    finally:
        tracker.begin(stopped, failed)  # the W&B run LeRobot made: finished beside what follows
        if failed:
            tracker.wait()
    return None


def loop_ended(hooks: list, rank: int) -> ProgressBeacon | None:
    """The watchdog's word that LeRobot's loop is over: rank 0 publishes next, the others are done."""
    beacon = next((hook for hook in hooks if isinstance(hook, ProgressBeacon)), None)
    if beacon is not None and rank == 0:
        beacon.now(PUBLISHING)
    elif beacon is not None:
        beacon.stop()
    return beacon


def train_loop_per_worker(config: dict) -> WorkerResult | None:
    entered = time.time()
    worker = WorkerConfig(**config)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    rank_logging()
    answer_stack_requests()
    node = ray.util.get_node_ip_address()
    log.info("raycluster worker rank %d of %d, pid %d, node %s", rank, world_size, os.getpid(), node)
    line, cfg, start, beacon = begin(worker, rank, context.get_local_rank(), world_size)
    if rank == 0:  # the group was ready when this rank began
        worker.journal.phase.remote(Phase("worker_group_ready", entered, start.attempt))
        worker.journal.phase.remote(Phase("start_agreed", time.time(), start.attempt, start.resumed_from or 0))
    hosts = rank_hosts(node, rank, world_size)
    args = line.worker_args(start.args, hosts, worker.sharding)
    if args != worker.lerobot_args:
        cfg = parse_train_config(args, validate=False)
    placement = Placement(rank, world_size, worker.use_gpu, worker.mixed_precision)
    device = ray.train.torch.get_device()
    keeper, every_rank_saves = worker.checkpoint_keeper, line.saves_on_every_rank
    shipping = checkpoint_shipping(worker.part_stores, keeper, rank, hosts, start.attempt, every_rank_saves)
    recorder, shipper, hooks = loop_hooks(worker, cfg, rank, world_size, device, start, shipping, beacon)
    backend = dist.get_backend()  # LeRobot's train ends by destroying the process group
    started = time.perf_counter()
    tracker = TrackerEnd()
    interrupted_at = run_loop(line, cfg, args, placement, hooks, rank, worker.curves, tracker)
    beacon = loop_ended(hooks, rank)
    if rank != 0:
        if shipper is not None:  # this host's part of the last checkpoints: rank 0's summary waits for it
            shipper.drain()
        return None
    published, lost = publish_all(worker, Path(cfg.output_dir), shipper, final=interrupted_at is None)
    # Waited for: the driver reads the journal once this returns, and one caller's calls arrive in order.
    published_at = Phase("final_checkpoint_published", time.time(), start.attempt)
    ray.get(worker.journal.phase.remote(published_at), timeout=ANSWER_S)
    tracker.wait()  # after the checkpoints: a stop's save is published first
    result = WorkerResult(
        world_size=world_size, backend=backend, policy_wrapper=recorder.policy_class,
        mixed_precision=line.precision(cfg, placement), final_step=recorder.last_step or start.resumed_from,
        samples_per_s=recorder.samples_per_s, loss_first=recorder.loss_first, loss_last=recorder.loss_last,
        checkpoints=[int(name) for name in published], resumed_from=start.resumed_from,
        uploads_skipped=shipper.skipped if shipper else [], uploads_failed=uploads_failed(worker, shipper),
        lost=lost, interrupted_at=interrupted_at, train_s=time.perf_counter() - started,
    )  # fmt: skip
    if beacon is not None:  # watched until the last call to the keeper has answered
        beacon.stop()
    return result
