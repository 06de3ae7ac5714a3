"""Retention, evaluation holds and fetches at one keeper, in one process: the project's own ``Retention`` (what goes,
and when), ``Holds`` (what an evaluation holds from its commit to its outcome) and ``kept_best`` (which hold the
evaluations keep), driven by the seeded scheduler with a fake clock, invariants checked after every event.

What a run is: a checkpoint commits every ``INTERVAL_S`` and is held for its evaluation, which the keeper announces
over the network (an announcement may come late, twice, or never: then the hold lasts until the evaluations end);
an evaluation takes its own time (some take many intervals), then releases its hold, or the hold of the best it
replaces. Fetches start at random moments, as a restarted worker group's resume does: the keeper's answer first
(which holds the newest complete checkpoint for one lease), then the fetch, which reads a chunk every so often and
ends, or dies mid-read (it reads no more and never ends). Once training is over, the evaluations end, keeping the
best. Retention runs where the keeper runs it: after every commit, every released hold and the evaluations' end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.checkpoints.holds import Holds
from raycluster.checkpoints.retention import Retention
from raycluster.dsim.scheduler import Network, Scheduler
from raycluster.dsim.sweep import InvariantBroken
from raycluster.evals.keeper import kept_best
from raycluster.evals.records import VALIDATED, EvalRecord

INTERVAL_S = 10.0
"""Between two commits."""


@dataclass(frozen=True)
class RetentionProfile:
    saves: int = 30
    keep: int = 2
    read_lease_s: float = 30.0
    evaluation_s: tuple[float, float] = (1.0, 25.0)
    slow_evaluations: float = 0.1
    """The share of evaluations that take 50-400 s (many intervals)."""
    lost_announcements: float = 0.0
    fetches: int = 8
    chunk_gap_s: tuple[float, float] = (0.1, 5.0)
    chunks: tuple[int, int] = (1, 40)
    dying_fetches: float = 0.2
    network: Network = field(default_factory=Network)


@dataclass
class Fetch:
    name: str
    last_read: float
    chunks_left: int
    dies: bool
    alive: bool = True


class _Announcements:
    """The evaluation keeper as ``Holds`` sees it: ``published.remote(name)``, a message over the network."""

    def __init__(self, world: RetentionWorld):
        self.published = self
        self._world = world

    def remote(self, name: str) -> None:
        if self._world.sim.rng.random() >= self._world.profile.lost_announcements:
            self._world.sim.send(lambda: self._world._evaluate(name))


class RetentionWorld:
    def __init__(self, seed: int, profile: RetentionProfile):
        self.sim, self.profile = Scheduler(seed, profile.network), profile
        self.retention = Retention(profile.keep, profile.read_lease_s)
        self.holds = Holds()
        self.holds.subscribe(_Announcements(self))
        self.complete: list[str] = []
        """The keeper's complete checkpoints, oldest first."""
        self.deleted: list[str] = []
        self.best: EvalRecord | None = None
        self.evaluating: set[str] = set()
        self.evaluated: set[str] = set()
        self.ended = False
        self.fetches: list[Fetch] = []
        for k in range(1, profile.saves + 1):
            self.sim.at(k * INTERVAL_S, lambda name=f"{k:06d}": self._commit(name))
        last = profile.saves * INTERVAL_S
        for _ in range(profile.fetches):
            self.sim.at(self.sim.rng.uniform(0, last), self._resume)
        self.sim.at(last + self.sim.rng.uniform(0, 5 * INTERVAL_S), self._end_evaluations)

    # The keeper: a commit holds its checkpoint, then announces it; retention after.
    def _commit(self, name: str) -> None:
        self.complete.append(name)
        self.holds.take(name)
        self.holds.announce(name)
        self._retain()

    def _retain(self) -> None:
        in_use = self.holds.__contains__
        go, _ = self.retention.due(list(self.complete), in_use, self.sim.now)
        for name in go:  # the keeper's deletion, its record first: from here on no one takes it for complete
            self._check_deletable(name)
            self.complete.remove(name)
            self.deleted.append(name)
            self.retention.deleted(name)

    # The evaluation keeper, as ``EvalKeeper.published`` and ``_settle`` decide (an actor of Ray calls, modelled
    # here): an announcement of a checkpoint evaluated already, or one after the end, releases its hold unless it
    # is the best; one under evaluation changes nothing.
    def _evaluate(self, name: str) -> None:
        if name in self.evaluating:
            return
        if name in self.evaluated or self.ended:
            if self.best is None or self.best.checkpoint != name:
                self.sim.send(lambda: self._unhold(name))
            return
        self.evaluating.add(name)
        slow = self.sim.rng.random() < self.profile.slow_evaluations
        took = self.sim.rng.uniform(50.0, 400.0) if slow else self.sim.rng.uniform(*self.profile.evaluation_s)
        self.sim.at(took, lambda: self._evaluated(name))

    def _evaluated(self, name: str) -> None:
        self.evaluating.discard(name)
        if self.ended:  # its hold went with the evaluations' end
            return
        self.evaluated.add(name)
        record = EvalRecord(name, VALIDATED, {"eval_loss": self.sim.rng.random()})
        self.best, released = kept_best(self.best, record, "eval_loss")
        if released is not None:
            self.sim.send(lambda: self._unhold(released))

    def _unhold(self, name: str) -> None:
        self.holds.release(name)
        self._retain()

    def _end_evaluations(self) -> None:
        self.ended = True
        self.holds.end(self.best.checkpoint if self.best else None)
        self._retain()

    # A restarted worker group's resume: the keeper's answer, then the fetch of it.
    def _resume(self) -> None:
        if not self.complete:
            return
        name = self.complete[-1]
        self.retention.lease(name, self.sim.now)
        self.sim.send(lambda: self._begin_fetch(name))

    def _begin_fetch(self, name: str) -> None:
        began = self.retention.fetch_begins(name, self.sim.now)
        if began and name not in self.complete:  # as the keeper's ``manifest``: its record is gone, refused
            self.retention.fetch_ends(name)
            began = False
        if not began:  # its deletion had begun or is done: the worker group restarts and asks again
            return
        fetch = Fetch(name, self.sim.now, self.sim.rng.randint(*self.profile.chunks),
                      self.sim.rng.random() < self.profile.dying_fetches)  # fmt: skip
        self.fetches.append(fetch)
        self._next_chunk(fetch)

    def _next_chunk(self, fetch: Fetch) -> None:
        gap = self.sim.rng.uniform(*self.profile.chunk_gap_s)
        self.sim.at(gap, lambda: self._read(fetch))

    def _read(self, fetch: Fetch) -> None:
        if fetch.dies and self.sim.rng.random() < 0.2:  # its worker died: no more reads, and no end
            fetch.alive = False
            return
        if fetch.name not in self.complete:
            if self.sim.now - fetch.last_read < self.profile.read_lease_s:
                raise InvariantBroken(f"a fetch reading {fetch.name} within its lease found it deleted")
            fetch.alive = False  # it stalled past its lease: its read fails, and the worker group restarts
            self.sim.send(lambda: self.retention.fetch_ends(fetch.name))
            return
        self.retention.read(fetch.name, self.sim.now)
        fetch.last_read, fetch.chunks_left = self.sim.now, fetch.chunks_left - 1
        if fetch.chunks_left > 0:
            self._next_chunk(fetch)
        else:
            fetch.alive = False
            self.sim.send(lambda: self.retention.fetch_ends(fetch.name))

    # What must hold.
    def _check_deletable(self, name: str) -> None:
        """At the moment retention deletes ``name``: nothing holds it, no fetch within its lease reads it, and the
        newest ``keep`` complete checkpoints stay."""
        if name in self.holds:
            raise InvariantBroken(f"retention deleted {name}, which is held")
        if name in self.complete[-self.profile.keep :]:
            raise InvariantBroken(f"retention deleted {name}, one of the newest {self.profile.keep}")
        for fetch in self.fetches:
            if fetch.alive and fetch.name == name and self.sim.now - fetch.last_read < self.profile.read_lease_s:
                raise InvariantBroken(f"retention deleted {name} under a fetch that read it {fetch.last_read}")

    def check(self) -> None:
        """After every event: what retention's tables name still exists, and so does the best."""
        stale = self.retention.tracked() - set(self.complete)
        if stale:
            raise InvariantBroken(f"retention still tracks {sorted(stale)}, which no longer exist")
        if self.best is not None and self.best.checkpoint not in self.complete:
            raise InvariantBroken(f"the best checkpoint, {self.best.checkpoint}, was deleted")

    def check_quiet(self) -> None:
        """Once nothing is left to happen: only the best is held, and every checkpoint beyond the newest ``keep``
        that nothing holds and no fetch within its lease reads is gone."""
        held = set(self.holds.names())
        if held - {self.best.checkpoint if self.best else None}:
            raise InvariantBroken(f"still held after the evaluations' end: {sorted(held)}")
        self.sim.now += self.profile.read_lease_s  # every lease runs out; the next save's retention:
        go, fetched = self.retention.due(list(self.complete), self.holds.__contains__, self.sim.now)
        if fetched:
            raise InvariantBroken(f"fetches that ended still hold {fetched}")
        if self.profile.saves >= self.profile.keep and len(self.complete) - len(go) < self.profile.keep:
            raise InvariantBroken(f"retention would keep {len(self.complete) - len(go)} of {self.profile.keep}")

    def run(self) -> RetentionWorld:
        self.sim.run(float("inf"), after_each=self.check)
        self.check_quiet()
        return self
