"""Where an attempt of a run starts: as asked, from the keeper's newest complete checkpoint, or from a
``last`` every rank has on its own node; and which checkpoint is the run's final one."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import ray
import torch.distributed as dist

from raycluster.checkpoints.transfer import fetch_directory
from raycluster.lerobot.api import (
    checkpoints_dir,
    newest_checkpoint,
    resume_flags,
    resumed_step,
)

log = logging.getLogger(__name__)

PUBLISH_SETTLE_S = 300.0
"""How long a restart waits for a publish the failed attempt left under way (every part of it had arrived: the
hosts are placing theirs) before resuming without it."""
ANSWER_S = 60.0
"""How long the keeper may take to answer a call of the resume path that does no I/O of its size."""
CHECK_S = 900.0
"""How long the keeper may take to say which checkpoint a resume takes (it reads the newest one's every file
against its record: minutes for a large one)."""


@dataclass(frozen=True)
class Start:
    """How an attempt starts, decided by rank 0 and broadcast: the flags, and what it resumes from."""

    args: list[str]
    resumed_from: int | None = None
    from_keeper: str | None = None
    """A checkpoint every node must fetch from the keeper before LeRobot resumes from it."""
    attempt: int = 1
    """1, then one more for each worker-group restart."""


def resume_source(keeper_step: int | None, local_steps: list[int | None], attempt: int) -> tuple[str, int] | None:
    """Where an attempt resumes from: ``("keeper", step)``, ``("local", step)`` or None (start as asked).

    Only a checkpoint every rank can reach will do: the keeper's (each node fetches it), or a ``last`` that
    every rank sees on its own node (one node, or a shared filesystem), which then needs no fetch. A
    first attempt resumes from the keeper alone (a restarted job); local files are only this run's own."""
    shared = local_steps[0] if attempt > 1 and len(set(local_steps)) == 1 else None
    if shared is not None and (keeper_step is None or shared >= keeper_step):
        return "local", shared
    return ("keeper", keeper_step) if keeper_step is not None else None


def decide_start(args: list[str], keeper, cfg, attempt: int, local_steps: list[int | None]) -> Start:
    """The flags of this attempt (see ``resume_source``). A failed attempt's output with nothing to resume
    from is moved aside, not deleted."""
    output_dir = Path(cfg.output_dir)
    kept = None
    if keeper is not None:
        # From here on no part of an earlier attempt is combined with anything; one whose every part had
        # arrived may still be being placed: waited for (polled, bounded), then the newest complete is taken.
        ray.get(keeper.begin_attempt.remote(attempt), timeout=ANSWER_S)
        deadline = time.monotonic() + PUBLISH_SETTLE_S
        while ray.get(keeper.publishing.remote(), timeout=ANSWER_S) and time.monotonic() < deadline:
            time.sleep(0.2)
        kept = ray.get(keeper.newest_complete.remote(), timeout=CHECK_S)
    source = resume_source(int(kept) if kept else None, local_steps, attempt)
    if source is not None and source[0] == "keeper":
        log.info("attempt %d: resuming from the keeper's checkpoint %s", attempt, kept)
        return Start(resume_flags(output_dir, kept, cfg.steps), source[1], kept, attempt)
    if source is not None:
        name = newest_checkpoint(output_dir).name  # rank 0's own `last`, which every rank sees too
        log.info("attempt %d: resuming from %s, which every rank has on its node", attempt, name)
        return Start(resume_flags(output_dir, name, cfg.steps), source[1], attempt=attempt)
    if attempt == 1:
        return Start(args, resumed_step(args))
    if output_dir.exists():
        aside = output_dir.with_name(f"{output_dir.name}.attempt{attempt - 1}")
        shutil.move(output_dir, aside)
        log.warning("attempt %d: no checkpoint every rank can reach; moved %s aside to %s", attempt, output_dir, aside)
    return Start(args, attempt=attempt)


def drop_abandoned_saves(output_dir: Path, start: Start) -> None:
    """This node's step directories beyond where a restarted (or keeper-resumed) attempt starts were written by
    an attempt that failed: removed, so that a step saved again holds this attempt's files only (a rank that
    landed on another host this time would otherwise leave its old shards in the part this host ships)."""
    if start.attempt == 1 and start.from_keeper is None:
        return
    for step_dir in checkpoints_dir(output_dir).glob("[0-9]*"):
        if step_dir.name.isascii() and step_dir.name.isdigit() and int(step_dir.name) > (start.resumed_from or 0):
            shutil.rmtree(step_dir, ignore_errors=True)


def agree_on_start(
    args: list[str], keeper, part_store, journal, cfg, rank: int, local_rank: int, world_size: int
) -> Start:
    """Rank 0 decides from the keeper and what every rank finds on its own node, as the journal's next attempt;
    all then run the same flags, with the keeper's checkpoint fetched to every node first when that is the
    source (into this node's part store, ``part_store``, when there is one)."""
    local = newest_checkpoint(Path(cfg.output_dir))
    local_steps: list[int | None] = [None] * world_size
    dist.all_gather_object(local_steps, int(local.name) if local is not None else None)
    decision = [None]
    if rank == 0:
        attempt = ray.get(journal.attempt_started.remote(), timeout=ANSWER_S)
        decision = [decide_start(args, keeper, cfg, attempt, local_steps)]
    dist.broadcast_object_list(decision, src=0)
    start: Start = decision[0]
    if local_rank == 0:
        drop_abandoned_saves(Path(cfg.output_dir), start)
    if start.from_keeper and local_rank == 0:
        target = checkpoints_dir(Path(cfg.output_dir)) / start.from_keeper
        fetch_directory(keeper, start.from_keeper, target, part_store)
    dist.barrier()
    return start
