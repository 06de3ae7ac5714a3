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

from raycluster.checkpoints.pacing import Drop, ShipQueue, Stage
from raycluster.checkpoints.transfer import prune_older
from raycluster.lerobot.api import LoopHooks

log = logging.getLogger(__name__)

STAGE_TIMEOUT_S = 600.0
"""How long this host's part store may take to stage (copy and hash) one part before the part counts as failed."""
ASK_EVERY_S = 1.0
"""How often a host holding a save it has not staged asks the keeper for the pick."""
ASK_TIMEOUT_S = 30.0
"""How long one ask may wait for the keeper's answer."""
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
    """Stages this host's part of the saves the keeper picks (the same steps on every host: ``pacing.py``), in a
    background thread, one at a time. The lead host (part 0, rank 0's) tells the keeper of each save as it is
    made; every host asks for the pick while it holds a save not yet staged. Training never waits for any of it, and nobody
    here waits for another host: the keeper commits once every host's part is in."""

    def __init__(self, part_store, keeper, attempt: int, part: int = 0, parts: int = 1):
        self.part_store, self.keeper, self.attempt, self.part, self.parts = part_store, keeper, attempt, part, parts
        self._queue = ShipQueue(attempt)
        self._dirs: dict[str, Path] = {}
        self._next: str | None = None
        self._unanswered = False
        self._told = None
        """The keeper's answer (to come) to the lead's newest save."""
        self._cond = threading.Condition()
        self.skipped: list[str] = []
        self.failed: dict[str, str] = {}
        """Checkpoint name -> why this host's part of it could not be staged."""
        threading.Thread(target=self._run, name="checkpoint-shipper", daemon=True).start()

    def submit(self, checkpoint_dir: Path) -> None:
        """A save of this host's ranks (called from the training loop: it only queues)."""
        name = Path(checkpoint_dir).name
        # The lead tells the keeper at once, not waited for here: the pick never lags its saves.
        told = self.keeper.saved.remote(self.attempt, name) if self.part == 0 else None
        with self._cond:
            self._told = told or self._told
            self._dirs[name] = Path(checkpoint_dir)
            self._apply(self._queue.saved(name))
            self._cond.notify_all()

    def _apply(self, actions: list[Stage | Drop]) -> None:
        for action in actions:
            if isinstance(action, Stage):
                self._next = action.name
            else:
                self._dirs.pop(action.name, None)
                self.skipped.append(action.name)
                log.debug("checkpoint %s passed over: the keeper picked a newer save", action.name)

    def _ask(self) -> None:
        """The keeper's newest pick; unanswered, it is asked again later (said once, not at each ask)."""
        with self._cond:  # the keeper's answer to the lead's newest word, else a question of its own
            asked, self._told = self._told or self.keeper.pick.remote(), None
        try:
            pick = ray.get(asked, timeout=ASK_TIMEOUT_S)
        except Exception as exc:
            if not self._unanswered:
                log.warning("the checkpoint keeper did not say which save to stage: %s", str(exc).splitlines()[0])
            self._unanswered = True
            return
        with self._cond:
            self._unanswered = False
            if pick is not None:
                self._apply(self._queue.picked(pick))
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._next is not None or self._queue.held)
                name = self._next
            if name is None:
                self._ask()
                with self._cond:
                    if self._next is None:  # no pick for what it holds yet: ask again in a moment
                        self._cond.wait(ASK_EVERY_S)
                continue
            self._stage(name)
            with self._cond:
                self._next = None
                self._apply(self._queue.staged(name))
                self._cond.notify_all()

    def _stage(self, name: str) -> None:
        source = self._dirs.pop(name)
        try:
            # Ray takes a stage cut off by the part store's death to the store started again, which starts over
            # from the save on disk (its word to the keeper may come twice, which the keeper takes once).
            staging = self.part_store.stage.remote(name, self.attempt, self.part, self.parts, str(source))
            ray.get(staging, timeout=STAGE_TIMEOUT_S)
            prune_older(source)
        except Exception as exc:  # a failed part must not stop training; the next pick retries
            cause = getattr(exc, "cause", None) or exc  # Ray wraps the part store's own error
            self.failed[name] = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
            log.error("part %d of checkpoint %s not staged (training goes on): %s", self.part, name, self.failed[name])
            # The keeper hears it even from a part store that died mid-stage: the pick is decided, not left open.
            self.keeper.part_failed.remote(name, self.attempt, self.part, self.failed[name])

    def drain(self, timeout: float | None = STAGE_TIMEOUT_S) -> bool:
        """Wait (bounded) until every save this host holds is staged or passed over."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._next is None and not self._queue.held and not self._queue.busy, timeout
            )


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


def checkpoint_shipping(part_stores: dict, keeper, rank: int, hosts: list[str], attempt: int, every_rank_saves: bool):
    """This rank's ``(shipper, hook)``, or None where it ships nothing (or no keeper takes checkpoints): with
    ``every_rank_saves`` (LeRobot main) the lowest rank of each host ships its host's part, else rank 0 ships the
    whole checkpoint."""
    part = host_part(hosts, rank) if every_rank_saves else ((0, 1) if rank == 0 else None)
    if part is None or keeper is None:
        return None
    shipper = Shipper(part_stores[ray.get_runtime_context().get_node_id()], keeper, attempt, *part)
    return shipper, Shipping(shipper, after_write=rank != 0)


def outcome(keeper, name: str, deadline_s: float = OUTCOME_DEADLINE_S, poll_s: float = 0.2) -> str | None:
    """Wait (polling, bounded) until the keeper has decided ``name``: None once complete, else why not."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        decided, why = ray.get(keeper.outcome.remote(name), timeout=max(1.0, deadline - time.monotonic()))
        if decided:
            return why
        time.sleep(poll_s)
    return f"not every host's part of it arrived within {deadline_s:.0f} s"
