"""Retention, evaluation holds and fetches at one keeper, in one process: the project's own ``Retention`` (what goes,
and when), ``Holds`` (what an evaluation holds from its commit to its outcome) and ``EvalBook`` (the evaluation
keeper's decisions, hosted as ``dsim/evaluations.py`` says), driven by the seeded scheduler with a fake clock,
invariants checked after every event.

What a run is: a checkpoint commits every ``INTERVAL_S`` and is held for its evaluation, which the keeper announces
over the network (an announcement may come late, twice, or never); an evaluation waits for a free slot, takes its
own time (some take many intervals, and time out) and validates or fails, then releases its hold, or the hold of
the best it replaces. A deletion
takes its own time too: retention decides (from then on no fetch may begin on it), the record goes a moment later.
Fetches start at random moments, on the newest checkpoint as a resume does (the keeper's answer first, which holds
it for one lease) or on any complete one; each reads a chunk now and then, its word that it still reads reaching
the keeper over the network, and ends, dies mid-read (reads no more and never ends), or stalls past its lease.
Once training is over the evaluations finish as ``EvalKeeper.finish`` does: every checkpoint still held whose
announcement was lost is evaluated, those under way get until the evaluation timeout, then every hold but the
best's goes. Retention runs where the keeper runs it: after every commit, every released hold, every fetch's end
and the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.checkpoints.holds import Holds
from raycluster.checkpoints.retention import Retention
from raycluster.dsim.evaluations import EVAL_TIMEOUT_S, SimEvaluations
from raycluster.dsim.scheduler import Network, Scheduler
from raycluster.dsim.sweep import InvariantBroken

INTERVAL_S = 10.0  # between two commits


@dataclass(frozen=True)
class RetentionProfile:
    saves: int = 30
    keep: int = 2
    read_lease_s: float = 30.0
    evaluation_s: tuple[float, float] = (1.0, 25.0)
    eval_slots: int = 8
    """How many evaluations run at once (the cluster's capacity for them); the rest wait."""
    slow_evaluations: float = 0.1
    """The share of evaluations that take 50-400 s (many intervals)."""
    failing_evaluations: float = 0.0
    lost_announcements: float = 0.0
    stopped: bool = False
    """The run ends by a stop (SIGTERM): the evaluations' end waits for none."""
    delete_s: tuple[float, float] = (0.01, 5.0)
    fetches: int = 8
    chunk_gap_s: tuple[float, float] = (0.1, 5.0)
    chunks: tuple[int, int] = (1, 40)
    dying_fetches: float = 0.2
    network: Network = field(default_factory=Network)


@dataclass
class Fetch:
    name: str
    heard: float  # when the keeper last heard that this fetch reads (its begin, or a chunk's word)
    chunks_left: int
    dies: bool
    lease: int  # its lease's number, which its end names
    alive: bool = True


class _Announcements:
    """The evaluation keeper as ``Holds`` sees it: ``published.remote(name)``, a message over the network."""

    def __init__(self, world: RetentionWorld):
        self.published = self
        self._world = world

    def remote(self, name: str) -> None:
        if self._world.sim.rng.random() >= self._world.profile.lost_announcements:
            self._world.sim.send(lambda: self._world.evals.published(name))


class RetentionWorld:
    def __init__(self, seed: int, profile: RetentionProfile):
        self.sim, self.profile = Scheduler(seed, profile.network), profile
        self.retention = Retention(profile.keep, profile.read_lease_s)
        self.holds = Holds()
        self.holds.subscribe(_Announcements(self))
        self.complete: list[str] = []
        """The checkpoints whose record exists, oldest first (those being deleted until their record goes)."""
        self.deleted: list[str] = []
        self.evals = SimEvaluations(self.sim, profile, self._unhold)
        self.fetches: list[Fetch] = []
        rng = self.sim.rng
        for k in range(1, profile.saves + 1):
            self.sim.at(k * INTERVAL_S, lambda name=f"{k:06d}": self._commit(name))
        last = profile.saves * INTERVAL_S
        for _ in range(profile.fetches):
            self.sim.at(rng.uniform(0, last), self._resume if rng.random() < 0.5 else self._fetch_any)
        self.sim.at(last + rng.uniform(0, 5 * INTERVAL_S), self._finish_evaluations)

    # The keeper: a commit holds its checkpoint, then announces it; retention after.
    def _commit(self, name: str) -> None:
        self.complete.append(name)
        self.holds.take(name)
        self.holds.announce(name)
        self._retain()

    def _retain(self) -> None:
        listed = self._listed()
        go, _ = self.retention.due(listed, self.holds.__contains__, self.sim.now)
        for name in go:  # decided now; its record goes a moment later, then every host's files
            self._check_deletable(name)
            self.sim.at(self.sim.rng.uniform(*self.profile.delete_s), lambda n=name: self._record_gone(n))

    def _listed(self) -> list[str]:
        """The complete checkpoints as the keeper's ``complete_names`` lists them: none whose deletion has begun."""
        return [n for n in self.complete if n not in self.retention.deleting]

    def _record_gone(self, name: str) -> None:
        self.complete.remove(name)
        self.deleted.append(name)
        self.retention.deleted(name)

    def _unhold(self, name: str) -> None:
        self.holds.release(name)
        self._retain()

    def _finish_evaluations(self) -> None:
        """``SimEvaluations.finish``; those under way get the timeout (none after a stop), then the end releases
        every hold but the best's."""
        self.evals.finish(self.holds.names(), self.profile.stopped)
        self.sim.at(0.0 if self.profile.stopped else EVAL_TIMEOUT_S, self._end_evaluations)

    def _end_evaluations(self) -> None:
        self.holds.end(self.evals.end())
        self._retain()

    # Fetches: a resume's (the keeper's answer first) and any other of a complete checkpoint.
    def _resume(self) -> None:
        listed = self._listed()
        if listed and self.retention.lease(listed[-1], self.sim.now) is not None:
            self.sim.send(lambda name=listed[-1]: self._begin_fetch(name))

    def _fetch_any(self) -> None:
        if self.complete:
            self._begin_fetch(self.sim.rng.choice(self.complete))

    def _begin_fetch(self, name: str) -> None:
        lease = self.retention.lease(name, self.sim.now)
        if lease is not None and name not in self.complete:  # as the keeper's ``manifest``: its record is gone
            self._fetch_ended(name, lease)
            lease = None
        if lease is None:  # its deletion had begun or is done: the worker group restarts and asks again
            return
        fetch = Fetch(
            name,
            self.sim.now,
            self.sim.rng.randint(*self.profile.chunks),
            self.sim.rng.random() < self.profile.dying_fetches,
            lease,
        )
        self.fetches.append(fetch)
        self._next_chunk(fetch)

    def _next_chunk(self, fetch: Fetch) -> None:
        self.sim.at(self.sim.rng.uniform(*self.profile.chunk_gap_s), lambda: self._read(fetch))

    def _read(self, fetch: Fetch) -> None:
        if fetch.dies and self.sim.rng.random() < 0.2:  # its worker died: no more reads, and no end
            fetch.alive = False
            return
        self.sim.send(lambda: self._heard(fetch))  # the keeper's ``touch``: fire and forget, it may come late
        if fetch.name not in self.complete:  # deleted under it: the read fails, and the worker group restarts
            fetch.alive = False
            self.sim.send(lambda: self._fetch_ended(fetch.name, fetch.lease))
            return
        fetch.chunks_left -= 1
        if fetch.chunks_left > 0:
            self._next_chunk(fetch)
        else:
            fetch.alive = False
            self.sim.send(lambda: self._fetch_ended(fetch.name, fetch.lease))

    def _fetch_ended(self, name: str, lease: int) -> None:
        """The keeper's ``release``: what retention spared for the fetch goes now, once no fetch holds it."""
        if self.retention.fetch_ends(name, lease):
            self._retain()

    def _heard(self, fetch: Fetch) -> None:
        self.retention.read(fetch.name, self.sim.now)
        if fetch.alive:
            fetch.heard = self.sim.now

    # What must hold.
    def _check_deletable(self, name: str) -> None:
        """As retention decides to delete ``name``: nothing holds it, it is not one of the newest ``keep``, and no
        fetch the keeper heard from within its lease reads it."""
        if name in self.holds:
            raise InvariantBroken(f"retention deleted {name}, which is held")
        if name in self.complete[-self.profile.keep :]:
            raise InvariantBroken(f"retention deleted {name}, one of the newest {self.profile.keep}")
        for fetch in self.fetches:
            if fetch.alive and fetch.name == name and self.sim.now - fetch.heard < self.profile.read_lease_s:
                raise InvariantBroken(f"retention deleted {name} under a fetch the keeper heard at {fetch.heard}")

    def check(self) -> None:
        """After every event: what retention's tables name still has its record, and so does the best."""
        tables = self.retention
        stale = (set(tables.readers) | set(tables.read_at) | tables.deleting) - set(self.complete)
        if stale:
            raise InvariantBroken(f"retention still tracks {sorted(stale)}, which no longer exist")
        best = self.evals.book.best
        if best is not None and best.checkpoint not in self.complete:
            raise InvariantBroken(f"the best checkpoint, {best.checkpoint}, was deleted")
        self.evals.check()

    def check_quiet(self) -> None:
        """Once nothing is left to happen: only the best is held, and when every lease has run out, the next save's
        retention takes every checkpoint but the newest ``keep`` and the best, and spares none for a fetch."""
        self.evals.check_quiet(set(self.complete) | set(self.deleted))
        best = {self.evals.book.best.checkpoint} if self.evals.book.best else set()
        if set(self.holds.names()) - best:
            raise InvariantBroken(f"still held after the evaluations' end: {self.holds.names()}")
        self.sim.now += self.profile.read_lease_s
        go, fetched = self.retention.due(list(self.complete), self.holds.__contains__, self.sim.now)
        kept = set(self.complete) - set(go)
        if fetched or kept != set(self.complete[-self.profile.keep :]) | best:
            raise InvariantBroken(f"retention would keep {sorted(kept)} (spared for a fetch: {fetched})")

    def run(self) -> RetentionWorld:
        self.sim.run(float("inf"), after_each=self.check)
        self.check_quiet()
        return self
