"""How a checkpoint leaves a training host: the lowest rank on each host hands what its host's ranks saved to
that host's part store, in a background thread, and training never waits for it.

Training (``worker.py``) and the sharded-checkpoint test job build their shipping here, the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import ray

from raycluster.checkpoints.transfer import prune_older
from raycluster.training.lerobot_api import LoopHooks

log = logging.getLogger(__name__)

STAGE_TIMEOUT_S = 600.0
"""How long this host's part store may take to stage (copy and hash) one part before the part counts as failed."""
OUTCOME_DEADLINE_S = 630.0
"""How long rank 0's end waits for the keeper to decide its newest checkpoint (the parts' deadline, then the
placements'; a margin over both)."""


def host_part(hosts: list[str], rank: int) -> tuple[int, int] | None:
    """``(part, parts)`` for the lowest rank on each host (rank 0's host is part 0): who ships that host's
    part of a checkpoint every host saves; None for every other rank."""
    if hosts.index(hosts[rank]) != rank:
        return None
    order = list(dict.fromkeys(hosts))
    return order.index(hosts[rank]), len(order)


class Shipper:
    """Stages this host's part of each checkpoint in a background thread with a queue of one: a checkpoint still
    waiting when a newer one is saved is skipped (logged), the one in flight always completes. Staging is this
    host's own work; the keeper commits once every host's part is in, and nobody here waits for that."""

    def __init__(self, part_store, attempt: int, part: int = 0, parts: int = 1):
        self.part_store, self.attempt, self.part, self.parts = part_store, attempt, part, parts
        self._pending: Path | None = None
        self._busy = False
        self._cond = threading.Condition()
        self.skipped: list[str] = []
        self.failed: dict[str, str] = {}
        """Checkpoint name -> why this host's part of it could not be staged."""
        threading.Thread(target=self._run, name="checkpoint-shipper", daemon=True).start()

    def submit(self, checkpoint_dir: Path) -> None:
        with self._cond:
            if self._pending is not None:
                self.skipped.append(self._pending.name)
                log.warning(
                    "checkpoint %s superseded by %s before its upload started: skipped",
                    self._pending.name,
                    checkpoint_dir.name,
                )
            self._pending = Path(checkpoint_dir)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                source, self._pending, self._busy = self._pending, None, True
            try:
                name = source.name
                staging = self.part_store.stage.remote(name, self.attempt, self.part, self.parts, str(source))
                ray.get(staging, timeout=STAGE_TIMEOUT_S)
                prune_older(source)
            except Exception as exc:  # a failed part must not stop training; the next save retries
                cause = getattr(exc, "cause", None) or exc  # Ray wraps the part store's own error
                self.failed[name] = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
                log.error(
                    "part %d of checkpoint %s not staged (training goes on): %s", self.part, name, self.failed[name]
                )
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def drain(self, timeout: float | None = STAGE_TIMEOUT_S) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout)


class Shipping(LoopHooks):
    """Hands every checkpoint to the shipper: rank 0 once LeRobot has completed it; the lead rank of another
    host once its host's ranks have written their shards."""

    def __init__(self, shipper: Shipper, after_write: bool):
        self.shipper, self.after_write = shipper, after_write

    def checkpoint_written(self, step_dir: Path) -> None:
        if self.after_write:
            self.shipper.submit(step_dir)

    def checkpoint_saved(self, step_dir: Path) -> None:
        if not self.after_write:
            self.shipper.submit(step_dir)


def checkpoint_shipping(part_stores: dict, rank: int, hosts: list[str], attempt: int, every_rank_saves: bool):
    """This rank's ``(shipper, hook)``, or None where it ships nothing: with ``every_rank_saves`` (LeRobot
    main) the lowest rank of each host ships its host's part, else rank 0 ships the whole checkpoint."""
    part = host_part(hosts, rank) if every_rank_saves else ((0, 1) if rank == 0 else None)
    if part is None:
        return None
    shipper = Shipper(part_stores[ray.get_runtime_context().get_node_id()], attempt, *part)
    return shipper, Shipping(shipper, after_write=rank != 0)


def outcome(keeper, name: str, deadline_s: float = OUTCOME_DEADLINE_S, poll_s: float = 0.2) -> str | None:
    """Wait (polling, bounded) until the keeper has decided ``name``: None once complete, else why not."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        decided, why = ray.get(keeper.outcome.remote(name))
        if decided:
            return why
        time.sleep(poll_s)
    return f"not every host's part of it arrived within {deadline_s:.0f} s"
