"""A tiny Ray actor that outlives worker-group restarts: how many attempts there were, and whether the
driver was asked to stop (every rank of every attempt reads it)."""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class RunJournal:
    def __init__(self) -> None:
        self._attempts = 0
        self._stop: str | None = None

    def attempt_started(self) -> int:
        self._attempts += 1
        return self._attempts

    def attempts(self) -> int:
        return self._attempts

    def request_stop(self, reason: str) -> None:
        self._stop = reason

    def stop_requested(self) -> str | None:
        return self._stop
