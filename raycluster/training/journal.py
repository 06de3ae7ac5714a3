"""A tiny Ray actor that outlives worker-group restarts: how many attempts there were, whether the driver
was asked to stop (every rank of every attempt reads it), and when each phase of the run ended."""

from __future__ import annotations

import ray

from raycluster.training.phases import Phase


@ray.remote(num_cpus=0)
class RunJournal:
    def __init__(self) -> None:
        self._attempts = 0
        self._groups: dict[str, int] = {}
        self._stop: str | None = None
        self._phases: list[Phase] = []

    def attempt_of(self, group: str) -> int:
        """The attempt of the worker group ``group`` (Ray Train starts one per attempt): a group not seen before is
        the next. Every rank asks as it begins, so it knows its attempt before any collective, and an attempt that
        fails before its ranks agree on where to start is counted too."""
        if group not in self._groups:
            self._attempts += 1
            self._groups[group] = self._attempts
        return self._groups[group]

    def attempts(self) -> int:
        return self._attempts

    def request_stop(self, reason: str) -> None:
        self._stop = reason

    def stop_requested(self) -> str | None:
        return self._stop

    def phase(self, phase: Phase) -> None:
        self._phases.append(phase)

    def failure_seen(self, at: float) -> int:
        """Ray Train's controller saw the current attempt fail: which attempt that was."""
        self._phases.append(Phase("failure_seen", at, self._attempts))
        return self._attempts

    def phases(self) -> list[Phase]:
        return list(self._phases)
