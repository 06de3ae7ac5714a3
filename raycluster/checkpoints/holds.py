"""Checkpoints held against retention for whoever subscribed to commits (the evaluation keeper), and the word of
each commit sent to it. The checkpoint side knows nothing of evaluations: a subscriber is told of every commit,
after the checkpoint is held for it, and releases what it holds; its end releases everything but what it keeps.
"""

from __future__ import annotations

import threading

from raycluster.faults import NO_FAULTS, Faults


class Holds:
    def __init__(self, faults: Faults = NO_FAULTS):
        self._lock = threading.Lock()
        self._subscriber = None
        self._held: set[str] = set()
        self._faults = faults

    def subscribe(self, subscriber) -> None:
        with self._lock:
            self._subscriber = subscriber

    def take(self, name: str) -> None:
        """As ``name`` becomes complete (under the keeper's lock): held from the moment anyone may take it for
        complete, so that neither retention nor the subscriber's end can come in between."""
        with self._lock:
            if self._subscriber is not None and name.isdigit():
                self._held.add(name)

    def announce(self, name: str) -> None:
        """After the commit: the subscriber is told without waiting (``lose_announcements``: never, a test's fault)."""
        with self._lock:
            subscriber = self._subscriber
        if subscriber is not None and name.isdigit() and not self._faults.lose_announcements:
            subscriber.published.remote(name)

    def release(self, name: str) -> None:
        with self._lock:
            self._held.discard(name)

    def end(self, keep: str | None) -> list[str]:
        """The subscriber's end: every hold released but ``keep``'s, and no later commit held or announced, so
        no hold outlives its outcome whichever way an announcement crossed the end. What stays held."""
        with self._lock:
            self._subscriber = None
            self._held &= {keep}
            return sorted(self._held, key=int)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._held

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._held, key=int)
