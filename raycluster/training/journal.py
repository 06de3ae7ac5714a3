"""A tiny Ray actor that outlives worker-group restarts, so the driver can tell how many happened."""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class RunJournal:
    def __init__(self) -> None:
        self._attempts = 0

    def attempt_started(self) -> int:
        self._attempts += 1
        return self._attempts

    def attempts(self) -> int:
        return self._attempts
