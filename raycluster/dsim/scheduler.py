"""A seeded scheduler with a fake clock: the deterministic core that protocol simulations run on.

Every event is a call at a simulated time; ties are broken by the order they were scheduled, and every random
choice (a message's delay, a repeat, a fault) comes from one ``random.Random(seed)``. So a run is a function of
its seed: a failing seed replays the very same history, event for event (FoundationDB's simulation testing).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Network:
    """How messages travel: each takes ``delay_s`` (low, high), and a ``slow_share`` of them ``slow_delay_s``
    instead (reordered behind later ones); ``repeat_share`` arrive twice."""

    delay_s: tuple[float, float] = (0.001, 0.05)
    slow_share: float = 0.0
    slow_delay_s: tuple[float, float] = (1.0, 30.0)
    repeat_share: float = 0.0


class Scheduler:
    def __init__(self, seed: int, network: Network = Network()):
        self.seed, self.network = seed, network
        self.rng = random.Random(seed)
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        """(when, the order it was scheduled in, what): a heap."""
        self._seq = 0
        self.events = 0

    def at(self, delay_s: float, call: Callable[[], None]) -> None:
        """Run ``call`` ``delay_s`` from now."""
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(0.0, delay_s), self._seq, call))

    def send(self, call: Callable[[], None]) -> None:
        """A message: ``call`` runs where it is sent, after the network's delay (maybe twice, maybe late)."""
        for _ in range(2 if self.rng.random() < self.network.repeat_share else 1):
            self.at(self.delay(), call)

    def delay(self) -> float:
        """One message's time on the network (late for a ``slow_share`` of them)."""
        slow = self.rng.random() < self.network.slow_share
        return self.rng.uniform(*(self.network.slow_delay_s if slow else self.network.delay_s))

    def run(self, until_s: float, after_each: Callable[[], None] = lambda: None) -> None:
        """Run every event due up to ``until_s`` (or until none is left), ``after_each`` after every one."""
        while self._queue and self._queue[0][0] <= until_s:
            self.now, _, call = heapq.heappop(self._queue)
            call()
            self.events += 1
            after_each()
        self.now = max(self.now, until_s) if not self._queue else self.now

    def idle(self) -> bool:
        return not self._queue
