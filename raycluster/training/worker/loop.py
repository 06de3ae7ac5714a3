"""What each Ray Train worker runs: an Accelerator over Ray's process group, then LeRobot's own ``train``."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import ray.train.torch
import torch.distributed as dist

from raycluster.checkpoints.part_store import local_part_store
from raycluster.lerobot import api as lerobot_api
from raycluster.lerobot.api import parse_train_config
from raycluster.lerobot.lines import Placement
from raycluster.lerobot.log_lines import rank_logging
from raycluster.training.interrupt import Interrupted, StopAgreement
from raycluster.training.phases import LoopPhases, Phase
from raycluster.training.watch.progress import PUBLISHING, STARTING, ProgressBeacon, rank_beacon
from raycluster.training.watch.stacks import answer_stack_requests
from raycluster.training.worker.config import WorkerConfig, WorkerResult
from raycluster.training.worker.curve_hooks import CurveHooks
from raycluster.training.worker.flags_check import FlagsRefused, Refused, agree_on_flags
from raycluster.training.worker.publishing import publish_all, uploads_failed
from raycluster.training.worker.recorder import StepRecorder
from raycluster.training.worker.resume import ANSWER_S, Start, agree_on_start
from raycluster.training.worker.shipping import checkpoint_shipping
from raycluster.training.worker.tracker import TrackerEnd

log = logging.getLogger(__name__)


def worker_group() -> str:
    """This rank's worker group, which Ray Train starts anew at every attempt: its placement group's id."""
    group = ray.util.get_current_placement_group()
    if group is None:  # Ray Train places every worker in its group's placement group
        raise RuntimeError("a training worker outside any placement group: not started by Ray Train")
    return group.id.hex()


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


def begin(worker: WorkerConfig, rank: int, local_rank: int, world_size: int, entered: float):
    """This rank's start: its beats from its first line (as its worker group's number, the journal's word, asked
    before any collective), so a rank stuck importing LeRobot, in the first collective or fetching the checkpoint
    it resumes from is watched; LeRobot's flags checked by every rank (``FlagsRefused`` on every rank when one
    refused them) and read; where every rank starts, agreed.
    (the installed LeRobot line, its config, the ``Start``, the beacon or None)"""
    beacon = None
    if worker.progress is not None:
        group = ray.get(worker.journal.group_of.remote(worker_group()), timeout=ANSWER_S)
        beacon = rank_beacon(worker.progress, rank, group, world_size, worker.beats_every_s)
    try:
        line, cfg = agree_on_flags(worker, rank, world_size)
    except FlagsRefused:
        if beacon is not None:
            beacon.stop()
        raise
    if rank == 0:
        log.info("effective batch = batch_size %d x world_size %d x grad_accum 1 = %d samples per step",
                 cfg.batch_size, world_size, cfg.batch_size * world_size)  # fmt: skip
    keeper, part_store = worker.checkpoint_keeper, local_part_store(worker.part_stores)
    start = agree_on_start(worker.lerobot_args, keeper, part_store, worker.journal, cfg, rank, local_rank, world_size)
    if rank == 0:  # the group was ready when this rank began (``entered``)
        worker.journal.phase.remote(Phase("worker_group_ready", entered, start.attempt))
        worker.journal.phase.remote(Phase("start_agreed", time.time(), start.attempt, start.resumed_from or 0))
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
        journal = worker.journal
        hooks.append(LoopPhases(journal.phase.remote, start.attempt, journal.reached.remote, journal.saved.remote))
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


def landed(worker: WorkerConfig, line, cfg, start: Start, node: str, rank: int, world_size: int):
    """Where the ranks landed decides this rank's flags (the sharding degrees) and how its host ships its part of
    each checkpoint: the flags, LeRobot's config of them, and the shipping."""
    hosts = rank_hosts(node, rank, world_size)
    args = line.worker_args(start.args, hosts, worker.sharding)
    if args != worker.lerobot_args:
        cfg = parse_train_config(args, validate=False)
    keeper, every_rank_saves = worker.checkpoint_keeper, line.saves_on_every_rank
    return args, cfg, checkpoint_shipping(worker.part_stores, keeper, rank, hosts, start.attempt, every_rank_saves)


def train_loop_per_worker(config: dict) -> WorkerResult | Refused | None:
    entered = time.time()
    worker = WorkerConfig(**config)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    rank_logging()
    answer_stack_requests()
    node = ray.util.get_node_ip_address()
    log.info("raycluster worker rank %d of %d, pid %d, node %s", rank, world_size, os.getpid(), node)
    try:
        line, cfg, start, beacon = begin(worker, rank, context.get_local_rank(), world_size, entered)
    except FlagsRefused as refused:
        return Refused(str(refused)) if rank == 0 else None
    args, cfg, shipping = landed(worker, line, cfg, start, node, rank, world_size)
    placement = Placement(rank, world_size, worker.use_gpu, worker.mixed_precision)
    device = ray.train.torch.get_device()
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
    published, lost = publish_all(worker, Path(cfg.output_dir), shipper, start.attempt)
    tracker.wait()  # after the checkpoints: a stop's save is published first
    result = WorkerResult(
        world_size=world_size,
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        backend=backend,
        policy_wrapper=recorder.policy_class,
        mixed_precision=line.precision(cfg, placement),
        final_step=recorder.last_step or start.resumed_from,
        samples_per_s=recorder.samples_per_s,
        loss_first=recorder.loss_first,
        loss_last=recorder.loss_last,
        checkpoints=[int(name) for name in published],
        resumed_from=start.resumed_from,
        uploads_skipped=shipper.skipped if shipper else [],
        uploads_failed=uploads_failed(worker, shipper),
        lost=lost,
        interrupted_at=interrupted_at,
        train_s=time.perf_counter() - started,
    )
    if beacon is not None:  # watched until the last call to the keeper has answered
        beacon.stop()
    return result
