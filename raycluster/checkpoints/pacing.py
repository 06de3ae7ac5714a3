"""Which saves the hosts ship: the same steps on every host, at the pace of the slowest.

A checkpoint that every host saves a part of commits only if *every* host ships that step. If each host chose
on its own (a queue of one, skipping what it had no time for), hosts slower than the save interval would skip
different steps and almost nothing would commit: 64 hosts of which 8 stage at 1.05-1.5 save intervals commit
21 saves of 200 that way. So the keeper picks, and every host stages only what it picked:

- the lead host (rank 0's, part 0) tells the keeper of each save it makes (``Pacer.saved``);
- the keeper picks the newest save once the previous pick is decided: every part of it arrived, or given up
  (``Pacer.decided``), so a pick waits for the slowest host and never for more;
- every host keeps its newest few saves (``ShipQueue``) and stages the newest picked one it holds.

When every host stages within a save interval, every save is picked; when some are slower, a checkpoint commits
each time the slowest host is free, which is the most any protocol can commit. Both classes are plain: the
keeper and each host's shipper thread host them, and ``raycluster.dsim`` drives the very same classes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

KEEP_SAVES = 2
"""How many saves a host keeps that the keeper has not picked (yet): a save is picked at most one staging round
after it is made, and every host saves the same steps, so the newest two always hold the next pick."""


def step_of(name: str) -> int:
    return int(name)


@dataclass(frozen=True)
class Pick:
    """Every host stages ``name`` of ``attempt`` (``passed_over``: newer saves than the last pick, not picked)."""

    attempt: int
    name: str
    passed_over: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Stage:
    """Stage this save now (one at a time)."""

    name: str


@dataclass(frozen=True)
class Drop:
    """This save will never be staged: its directory may go."""

    name: str


class Pacer:
    """The keeper's side: one pick open at a time, the lead host's newest save. A pick still open after
    ``deadline_s`` (no host's part of it came, nor word that one failed) is closed, and the newest save picked."""

    def __init__(self, deadline_s: float = 300.0) -> None:
        self.deadline_s = deadline_s
        self.attempt = 0
        self.newest: str | None = None
        self.open: Pick | None = None
        self.opened_at = 0.0
        self.last: Pick | None = None
        self.unpicked = 0
        """Saves the lead told of since the last pick: all but one of them are passed over at the next."""

    def begin_attempt(self, attempt: int) -> None:
        """A restarted worker group saves anew: nothing of an older attempt is picked any more."""
        if attempt > self.attempt:
            self.attempt, self.newest, self.open, self.last, self.unpicked = attempt, None, None, None, 0

    def saved(self, attempt: int, name: str, now: float) -> Pick | None:
        """The lead host saved ``name``; the new pick if one is made now."""
        self.begin_attempt(attempt)
        if attempt < self.attempt:
            return None
        if self.newest is None or step_of(name) > step_of(self.newest):
            self.newest, self.unpicked = name, self.unpicked + 1
        return self.overdue(now) if self.open is not None else self._pick(now)

    def decided(self, attempt: int, name: str, now: float) -> Pick | None:
        """``name`` of ``attempt`` is complete or given up; the next pick if one is made now."""
        if self.open != Pick(attempt, name):
            return None
        self.open = None
        return self._pick(now)

    def overdue(self, now: float) -> Pick | None:
        """The next pick, if the open one has been open longer than ``deadline_s``."""
        if self.open is None or now - self.opened_at <= self.deadline_s:
            return None
        log.warning(
            "checkpoint %s: no part of it came within %.0f s of its pick; the newest save is picked instead",
            self.open.name,
            self.deadline_s,
        )
        self.open = None
        return self._pick(now)

    def current(self) -> Pick | None:
        """The newest pick of the current attempt (what a host asks for)."""
        return self.last

    def _pick(self, now: float) -> Pick | None:
        if self.newest is None or (self.last is not None and step_of(self.newest) <= step_of(self.last.name)):
            return None
        self.open = self.last = Pick(self.attempt, self.newest, passed_over=self.unpicked - 1)
        self.opened_at, self.unpicked = now, 0
        return self.open


class ShipQueue:
    """One host's side: its saves not yet staged, and which one to stage next. A host stages only what the keeper
    picked, the newest such save it holds, one at a time; saves older than a pick, and beyond the newest
    ``keep`` not yet picked, are dropped."""

    def __init__(self, attempt: int, keep: int = KEEP_SAVES):
        self.attempt, self.keep = attempt, keep
        self.held: list[str] = []
        self.busy: str | None = None
        self.pick: str | None = None
        self.staged_last: str | None = None

    def saved(self, name: str) -> list[Stage | Drop]:
        """A save of this host's (one already staged, or older than that, is not staged again)."""
        if self.staged_last is not None and step_of(name) <= step_of(self.staged_last):
            return []
        if name != self.busy and name not in self.held:
            self.held = sorted([*self.held, name], key=step_of)
        return self._next()

    def picked(self, pick: Pick) -> list[Stage | Drop]:
        """The keeper's newest pick (repeated and out-of-order word is harmless: only a newer pick counts)."""
        if pick.attempt != self.attempt or (self.pick is not None and step_of(pick.name) <= step_of(self.pick)):
            return []
        self.pick = pick.name
        return self._next()

    def staged(self, name: str) -> list[Stage | Drop]:
        """Staging ``name`` ended (whether or not it succeeded): the host is free."""
        if self.busy == name:
            self.busy = None
        return self._next()

    def _next(self) -> list[Stage | Drop]:
        actions: list[Stage | Drop] = []
        if self.pick is not None:
            actions += [Drop(n) for n in self.held if step_of(n) < step_of(self.pick)]
            self.held = [n for n in self.held if step_of(n) >= step_of(self.pick)]
        unpicked = [n for n in self.held if n != self.pick]
        actions += [Drop(n) for n in unpicked[: max(0, len(unpicked) - self.keep)]]
        self.held = [n for n in self.held if n == self.pick or n in unpicked[-self.keep :]]
        if self.busy is None and self.pick in self.held:
            self.busy = self.staged_last = self.pick
            self.held.remove(self.pick)
            actions.append(Stage(self.pick))
        return actions
