"""A host's part store process that dies alone (its host lives) and that Ray starts again, as the checkpoint
simulation's hosts go through it (``Profile.store_deaths``): what it had staged and its memory of placements
are gone, its root is intact, and every call cut off by the death or sent while it was down reaches the store
started again (the part store's ``max_task_retries``), once each and in no set order. A word it was sending to
the keeper may die with it (``say``)."""

from __future__ import annotations

from collections.abc import Callable

from raycluster.checkpoints.effects import Place
from raycluster.checkpoints.placements import Placements
from raycluster.dsim.host import Host
from raycluster.dsim.profile import INTERVAL_S, Profile
from raycluster.dsim.scheduler import Scheduler
from raycluster.dsim.turns import Turns

RESTARTS = 3
"""How often Ray starts one host's part store again (the part store's ``max_restarts``); a death past it is a
host whose part store is gone for good, which the simulation's host deaths cover, and is not drawn here."""


class StoreProcesses:
    """Schedules ``profile.store_deaths`` deaths at seeded moments; ``call`` is how any call reaches a part store.
    ``place_again(host, place)``: a place the death cut off, carried out anew on the store started again."""

    def __init__(
        self,
        sim: Scheduler,
        profile: Profile,
        hosts: list[Host],
        turns: Turns,
        place_again: Callable[[Host, Place], None],
    ):
        self.sim, self.profile, self.turns, self.place_again = sim, profile, turns, place_again
        self.deaths: dict[int, int] = {}
        for _ in range(profile.store_deaths):
            index, when = sim.rng.randrange(profile.hosts), sim.rng.uniform(0, profile.saves * INTERVAL_S)
            sim.at(when, lambda h=hosts[index]: self.dies(h))

    @staticmethod
    def call(host: Host, call: Callable[[], None]) -> None:
        """A call reaching ``host``'s part store: now, or (its process down) once Ray has started it again."""
        if host.store_up:
            call()
        else:
            host.deferred.append(call)

    def dies(self, host: Host) -> None:
        """Its part store's process dies, the host lives: its staging goes, its root stays."""
        if not host.alive or not host.store_up or self.deaths.get(host.index, 0) >= RESTARTS:
            return
        self.deaths[host.index] = self.deaths.get(host.index, 0) + 1
        host.store_up, host.store_epoch = False, host.store_epoch + 1
        host.lost, host.staging = set(host.staged), set()
        for place in host.in_flight:  # cut off; one writing maybe after some of its files went in, whatever was
            # decided of it since (its removal waits behind it, cut off too, or gave up waiting); Ray takes it on
            if place in host.writing and self.sim.rng.random() < 0.5:
                host.root[place.name] = place.attempt
            host.deferred.append(lambda p=place: self.place_again(host, p))
        host.deferred += self.turns.cut_off(host)  # the removals that waited for a turn
        host.in_flight, host.writing = [], []
        epoch = host.store_epoch
        self.sim.at(self.sim.rng.uniform(*self.profile.store_restart_s), lambda: self._started(host, epoch))

    def say(
        self, host: Host, epoch: int, word: Callable[[], None], returned: Callable[[], None], again: Callable | None
    ) -> None:
        """A part store's ``word`` to the keeper (begun in process ``epoch``), and its call's return once the keeper
        took it (``returned``), as the part store waits for it. A word still in the process when it dies may go
        with it (it may have left already: a coin); a call cut off by a death before its return reached its
        caller, the word taken or not, reaches the store started again: ``again`` (a place cut off is on its way
        there already: ``dies``). A repeated word returns once."""
        heard: list[bool] = []

        def back() -> None:  # the return, at its caller
            if host.store_epoch == epoch:
                returned()
            elif again is not None:
                self.call(host, again)

        def taken() -> None:
            died = host.store_epoch != epoch
            if not died or self.sim.rng.random() < 0.5:
                word()
            if not heard:
                heard.append(True)
                self.sim.at(0.0 if died else self.sim.delay(), back)

        self.sim.send(taken)

    def _started(self, host: Host, epoch: int) -> None:
        """Ray has started it again: a new process (no memory of placements); the calls held for it arrive in no
        set order, each once (Ray runs a retried call again only if a death cuts it off again)."""
        if host.store_epoch != epoch or host.store_up:
            return
        host.store_up, host.placements = True, Placements()
        calls, host.deferred = host.deferred, []
        for call in calls:
            self.sim.at(self.sim.rng.uniform(*self.profile.network.delay_s), call)
