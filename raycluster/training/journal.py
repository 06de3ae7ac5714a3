"""A tiny Ray actor that outlives worker-group restarts: how many attempts there were, whether the driver
was asked to stop (every rank of every attempt reads it), when each phase of the run ended, and what the hang
watchdog must not forget (the worker groups that failed, the hangs it saw). It is never restarted: what it
holds is the run's word, where the hang board, which Ray restarts, holds only beats that come again."""

from __future__ import annotations

import ray

from raycluster.ledger import AttemptSteps
from raycluster.training.phases import Phase


@ray.remote(num_cpus=0)
class RunJournal:
    def __init__(self) -> None:
        self._attempts = 0
        self._groups: dict[str, int] = {}
        """Each worker group's number, by its placement group's id."""
        self._failed_through = 0
        """Worker groups up to this number failed: their ranks are no longer watched."""
        self._hangs: dict[int, str] = {}
        """The watchdog's line for each worker group it found hung."""
        self._stop: str | None = None
        self._phases: list[Phase] = []
        self._reached: dict[int, int] = {}
        self._saving: dict[int, float] = {}
        """Attempt -> the seconds its loop was blocked saving checkpoints between two steps."""
        """The last step each attempt's rank 0 finished (the ledger's steps redone)."""

    def group_of(self, group: str) -> int:
        """The number of the worker group ``group`` (its placement group's id; Ray Train starts a group anew at
        every attempt), by which the watchdog knows its ranks: a group not seen before is the next. Every rank
        asks at its first line, before any collective, so its beats are watched from there; a group that fails
        before its ranks agree on where to start has a number too, though it is no attempt."""
        return self._groups.setdefault(group, len(self._groups) + 1)

    def groups(self) -> int:
        return len(self._groups)

    def attempt_started(self) -> int:
        """Rank 0, once every rank has begun: the attempts that agreed on where to start (the resume's rules and
        the phases count these)."""
        self._attempts += 1
        return self._attempts

    def attempts(self) -> int:
        return self._attempts

    def request_stop(self, reason: str) -> None:
        self._stop = reason

    def stop_requested(self) -> str | None:
        return self._stop

    def phase(self, phase: Phase) -> None:
        self._phases.append(phase)

    def failure_seen(self, at: float) -> None:
        """Ray Train's controller saw the current worker group fail (recorded as the attempt it had agreed as):
        the watchdog stops reading its beats and every earlier group's."""
        self._phases.append(Phase("failure_seen", at, self._attempts))
        self._failed_through = len(self._groups)

    def failed_through(self) -> int:
        return self._failed_through

    def hang_seen(self, group: int, line: str) -> None:
        self._hangs[group] = line

    def newest_hang(self) -> str | None:
        """The newest worker group's hang, if it hung (an earlier group's was recovered from)."""
        return self._hangs.get(len(self._groups))

    def phases(self) -> list[Phase]:
        return list(self._phases)

    def reached(self, attempt: int, step: int) -> None:
        self._reached[attempt] = max(step, self._reached.get(attempt, step))

    def saved(self, attempt: int, seconds: float) -> None:
        self._saving[attempt] = self._saving.get(attempt, 0.0) + seconds

    def attempt_steps(self) -> list[AttemptSteps]:
        """Each attempt's steps, oldest first: where it started (its ``start_agreed``) and the last step its
        rank 0 finished (where it started, when it finished none)."""
        resumed = {p.attempt: p.step for p in self._phases if p.name == "start_agreed"}
        return [
            AttemptSteps(resumed[a], max(resumed[a], self._reached.get(a, 0)), self._saving.get(a, 0.0))
            for a in sorted(resumed)
        ]
