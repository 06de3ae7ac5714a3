"""A checkpoint's turn in a simulated part store, as ``NameCalls`` gives it in the real one: one place or removal of
a checkpoint at a time on a host; the calls waiting for it take it in no set order once it is free (a lock is not a
queue); each waits at most ``turn_s`` for it, then gives up (a place then fails, a removal is lost: its attempt was
marked given up before it began to wait). A part store's death cuts every waiting call off: Ray takes it to the
store started again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from raycluster.dsim.host import Host
from raycluster.dsim.scheduler import Scheduler


@dataclass
class Waiting:
    run: Callable[[], None]
    """The call, once it has the turn."""
    again: Callable[[], None] | None
    """The whole call, run again on the store started again if a death cuts it off while it waits (None: it is
    taken there by other means, as a place is)."""
    gave_up: Callable[[], None]
    over: bool = False


class Turns:
    def __init__(self, sim: Scheduler, turn_s: float):
        self.sim, self.turn_s = sim, turn_s

    def take(self, host: Host, name: str, waiting: Waiting) -> None:
        """``waiting.run`` now if ``name``'s turn on ``host`` is free, else once it is, or ``gave_up`` after
        ``turn_s``. Whoever runs must ``release`` the turn when its call ends."""
        if name not in host.turns:
            host.turns[name] = []
            waiting.run()
            return
        host.turns[name].append(waiting)
        self.sim.at(self.turn_s, lambda: self._expired(host, name, waiting))

    def release(self, host: Host, name: str) -> None:
        queue = host.turns[name]
        if not queue:
            del host.turns[name]
            return
        waiting = queue.pop(self.sim.rng.randrange(len(queue)))
        waiting.over = True
        waiting.run()

    def cut_off(self, host: Host) -> list[Callable[[], None]]:
        """Its part store died: every turn is gone; the calls that waited, for Ray to take to the new one."""
        calls = []
        for queue in host.turns.values():
            for waiting in queue:
                waiting.over = True
                if waiting.again is not None:
                    calls.append(waiting.again)
        host.turns = {}
        return calls

    def _expired(self, host: Host, name: str, waiting: Waiting) -> None:
        if waiting.over or not host.alive:  # a dead host's calls never answer (it is replaced: ``cut_off``)
            return
        waiting.over = True
        host.turns[name].remove(waiting)
        waiting.gave_up()
