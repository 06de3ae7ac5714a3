"""The checkpoint commit protocol at N hosts, in one process: the project's own ``PartSet``, ``Pacer`` and
``ShipQueue`` driven by a seeded scheduler with a fake clock, no Ray, invariants checked after every event.

What a run is: every host saves the same steps every ``interval_s`` (as ranks in one collective do); each host
stages the saves its ``ShipQueue`` chooses, taking its own time (``Profile.slow``: some or all hosts take longer
than the save interval); every message between a host and the keeper travels through the scheduler's network
(delayed, reordered, repeated); a host may die mid-run, after which the worker group restarts as a new attempt
from the newest committed step, as Ray Train's does. ``World.check`` states what must hold after every event.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from raycluster.checkpoints.pacing import Drop, Pacer, Pick, ShipQueue, Stage
from raycluster.checkpoints.parts import Complete, GivenUp, Part, PartSet
from raycluster.dsim.scheduler import Network, Scheduler

INTERVAL_S = 60.0
"""Seconds between two saves (only ratios to it matter)."""


@dataclass(frozen=True)
class Profile:
    """A run's shape: ``hosts``, ``saves`` per attempt, which hosts stage slowly (``slow``: host -> its staging
    time in save intervals; every other host takes ``fast``), the network, and a host that dies (``death``:
    (host, after how many intervals))."""

    hosts: int
    saves: int
    slow: dict[int, float] = field(default_factory=dict)
    fast: float = 0.3
    network: Network = Network()
    death: tuple[int, float] | None = None
    restart_s: float = 90.0
    stage_failures: float = 0.0
    """The share of stagings that fail (a full disk, a part store that died mid-stage): the keeper is told."""


class InvariantBroken(AssertionError):
    pass


@dataclass
class Host:
    index: int
    queue: ShipQueue
    alive: bool = True
    staged: set[tuple[str, int]] = field(default_factory=set)
    """(name, attempt) of every part this host staged, in any attempt."""


class World:
    def __init__(self, seed: int, profile: Profile):
        self.sim, self.profile = Scheduler(seed, profile.network), profile
        self.parts, self.pacer = PartSet(deadline_s=5 * INTERVAL_S), Pacer(deadline_s=5 * INTERVAL_S)
        self.attempt = 1
        self.hosts = [Host(h, ShipQueue(1)) for h in range(profile.hosts)]
        self.picks: set[Pick] = set()
        self.completed: dict[str, Complete] = {}
        self.given_up: list[GivenUp] = []
        self.stages: list[tuple[int, int, str]] = []
        """(host, attempt, name) of every staging started."""
        self._checked_stages = self._checked_commits = 0
        self._touched: set[int] = set()
        self._start_attempt(first_step=0, at=0.0)
        if profile.death is not None:
            host, after = profile.death
            self.sim.at(after * INTERVAL_S, lambda: self._die(host))

    # The hosts' side: save, stage, tell the keeper.
    def _start_attempt(self, first_step: int, at: float) -> None:
        attempt, self.final = self.attempt, f"{first_step + self.profile.saves:06d}"
        for k in range(1, self.profile.saves + 1):
            name = f"{first_step + k:06d}"
            for host in self.hosts:  # ranks save the same step within a fraction of an interval of each other
                jitter = self.sim.rng.uniform(0.0, 0.05) * INTERVAL_S
                self.sim.at(at + k * INTERVAL_S + jitter, lambda h=host, n=name: self._saved(h, attempt, n))

    def _saved(self, host: Host, attempt: int, name: str) -> None:
        if not host.alive or attempt != self.attempt:
            return
        self._act(host, attempt, host.queue.saved(name))
        if host.index == 0:
            self.sim.send(lambda: self._keeper_saved(attempt, name))

    def _act(self, host: Host, attempt: int, actions: list[Stage | Drop]) -> None:
        self._touched.add(host.index)
        for action in actions:
            if isinstance(action, Stage):
                self.stages.append((host.index, attempt, action.name))
                factor = self.profile.slow.get(host.index, self.profile.fast)
                took = factor * INTERVAL_S * self.sim.rng.uniform(0.97, 1.03)
                fails = self.sim.rng.random() < self.profile.stage_failures
                self.sim.at(took, lambda n=action.name, f=fails: self._staged(host, attempt, n, f))

    def _staged(self, host: Host, attempt: int, name: str, failed: bool) -> None:
        if not host.alive or attempt != self.attempt:
            return
        if failed:
            self.sim.send(lambda: self._decide(self.parts.failed(name, attempt, host.index, "staging failed")))
        else:
            host.staged.add((name, attempt))
            part = Part(host.index, {f"part{host.index}": {"size": 1, "sha256": name}}, host.index)
            self.sim.send(lambda: self._keeper_arrived(name, attempt, part))
        self._act(host, attempt, host.queue.staged(name))

    def _picked(self, host: Host, pick: Pick) -> None:
        if host.alive and pick.attempt == self.attempt:
            self._act(host, pick.attempt, host.queue.picked(pick))

    # The keeper's side: the very classes CheckpointKeeper hosts.
    def _keeper_saved(self, attempt: int, name: str) -> None:
        self._decide(self.parts.expired(self.sim.now))
        self._announce(self.pacer.saved(attempt, name, self.sim.now))

    def _keeper_arrived(self, name: str, attempt: int, part: Part) -> None:
        self._decide(self.parts.arrived(name, attempt, self.profile.hosts, part, self.sim.now))

    def _decide(self, decisions: list[Complete | GivenUp]) -> None:
        for d in decisions:
            if isinstance(d, Complete):
                if d.name not in self.completed:
                    self.completed[d.name] = d
                self._decide(self.parts.superseded(int(d.name)))
            else:
                self.given_up.append(d)
            self._announce(self.pacer.decided(d.attempt, d.name, self.sim.now))

    def _announce(self, pick: Pick | None) -> None:
        if pick is not None:
            self.picks.add(pick)
            for host in self.hosts:
                self.sim.send(lambda h=host: self._picked(h, pick))

    # Faults.
    def _die(self, index: int) -> None:
        self.hosts[index].alive = False
        self.sim.at(self.profile.restart_s, self._restart)

    def _restart(self) -> None:
        """Ray Train restarts the worker group (the dead host replaced) from the newest committed step."""
        self.attempt += 1
        self._decide(self.parts.begin_attempt(self.attempt))
        self.pacer.begin_attempt(self.attempt)
        for host in self.hosts:
            host.alive, host.queue = True, ShipQueue(self.attempt)
        newest = max((int(n) for n in self.completed), default=0)
        self._start_attempt(first_step=newest, at=self.sim.now)

    # What must hold.
    def check(self) -> None:
        """After every event: what changed since the last check (each commit is checked once, when it comes)."""
        for name in list(self.completed)[self._checked_commits :]:
            complete = self.completed[name]
            if sorted(complete.parts) != list(range(self.profile.hosts)):
                raise InvariantBroken(f"checkpoint {name} committed with parts {sorted(complete.parts)}")
            for index in complete.parts:
                if (name, complete.attempt) not in self.hosts[index].staged:
                    raise InvariantBroken(f"checkpoint {name} names a part host {index} never staged")
        self._checked_commits = len(self.completed)
        for index, attempt, name in self.stages[self._checked_stages :]:
            if Pick(attempt, name) not in self.picks:
                raise InvariantBroken(f"host {index} staged {name} of attempt {attempt}, which no pick named")
        self._checked_stages = len(self.stages)
        for index in self._touched:
            queue = self.hosts[index].queue
            if len(queue.held) + (queue.busy is not None) > queue.keep + 2:
                raise InvariantBroken(f"host {index} holds more than {queue.keep + 2} saves: {queue.held}")
        self._touched.clear()

    def check_quiet(self) -> None:
        """Once nothing is left to happen: every part staged is decided, committed or given up; the last attempt's
        last save, which no host died during, is committed (training never ends on a lost save); and no host
        holds a save any more."""
        if self.parts.pending_names():
            raise InvariantBroken(f"parts still pending at the end: {sorted(self.parts.pending_names())}")
        final = self.completed.get(self.final)
        failed = any(g.name == self.final and "staging failed" in g.reason for g in self.given_up)
        if (final is None or final.attempt != self.attempt) and not failed:
            raise InvariantBroken(f"the last save, {self.final} of attempt {self.attempt}, was not committed")
        for host in self.hosts:
            if host.queue.held or host.queue.busy:
                raise InvariantBroken(f"host {host.index} still holds saves {host.queue.held} at the end")

    def run(self) -> World:
        """Until nothing is left to happen (the saves are finite, and so is everything they set off)."""
        self.sim.run(float("inf"), after_each=self.check)
        self._decide(self.parts.expired(self.sim.now + self.parts.deadline_s + 1))
        self.check_quiet()
        return self


def ideal_commits(saves: int, slowest: float) -> int:
    """The most any protocol commits: the slowest host stages the newest save each time it is free."""
    commits, last, now = 0, 0, INTERVAL_S
    while last < saves:
        newest = min(saves, int(now // INTERVAL_S))
        if newest <= last:  # nothing new since its last: it waits for the next save
            now = (last + 1) * INTERVAL_S
            continue
        last, now, commits = newest, now + slowest * INTERVAL_S, commits + 1
    return commits


def paced_commits(hosts: int, slow: dict[int, float], saves: int = 200, seed: int = 1) -> tuple[int, int]:
    """Saves committed of ``saves`` at ``hosts`` hosts (``slow``: host -> staging time in save intervals, every
    other host within one), beside the most any protocol could commit (the bench's and the tests' figure)."""
    world = World(seed, Profile(hosts=hosts, saves=saves, slow=slow)).run()
    return len(world.completed), ideal_commits(saves, max(slow.values(), default=Profile.fast))


def slow_hosts(hosts: int, count: int, low: float = 1.05, high: float = 1.5, seed: str = "slow") -> dict[int, float]:
    """``count`` of ``hosts`` hosts, chosen by ``seed``, staging at ``low``-``high`` save intervals."""
    rng = random.Random(f"{seed} {hosts} {count}")
    return {host: rng.uniform(low, high) for host in rng.sample(range(hosts), count)}
