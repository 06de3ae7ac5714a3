"""The evaluation keeper's decisions, as a plain class: which published checkpoint is evaluated, skipped, timed
out or released at once, what each one's outcome is, and which is the best. No Ray, no threads and no clock of its
own: the keeper (``keeper.py``) holds it under one lock, carries out what it decides (start a task, cancel one,
release a hold) and hands it the time; the retention simulation (``raycluster/dsim/evaluations.py``, in
``tests/test_dsim_retention.py``) drives the same class through a thousand seeded runs, invariants after every event.

The rules it keeps, whatever order the events come in:
- a checkpoint gets one outcome, once; a late or repeated word changes nothing;
- every checkpoint's hold is released once: when its outcome is in, unless it is the best, or at once when it
  has an outcome already or the run has ended; the best is released only when a better one replaces it;
- at most ``waiting_limit`` evaluations wait for capacity: a newer checkpoint skips the oldest waiting one, and one
  skipped never runs (its task asks before it begins, and is told no);
- an evaluation running longer than ``timeout_s`` from its start is due to be timed out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.evals.records import EvalRecord
from raycluster.evals.resources import BEST_METRICS

WAITING = 4
"""Evaluations submitted but not started (no capacity yet) beyond which the oldest is skipped: when they take
longer than checkpoints take to come, the newest are evaluated, and held checkpoints do not pile up on disk."""


@dataclass(frozen=True)
class Admission:
    """What to do with a checkpoint just published."""

    submit: bool = False
    """Start its evaluation."""
    release: bool = False
    """Release its hold now: it has an outcome already (a restarted attempt committed the step again), or the run
    has ended."""
    skip: list[str] = field(default_factory=list)
    """The oldest evaluations waiting for capacity, beyond the limit, to be skipped so that newer ones go first
    (this one among them when its announcement came late, after newer ones)."""
    newest: str = ""
    """The newest checkpoint waiting, which the skipped ones give way to."""


class EvalBook:
    def __init__(self, metric: str, timeout_s: float, waiting_limit: int = WAITING):
        self.metric, self.timeout_s, self.waiting_limit = metric, timeout_s, waiting_limit
        self._unsettled: dict[str, tuple[float, str] | None] = {}
        """Submitted and without an outcome -> when and where its task started (None: waiting for capacity)."""
        self.records: dict[str, EvalRecord] = {}
        self.best: EvalRecord | None = None
        self.closed = False

    def admit(self, name: str) -> Admission:
        if name in self._unsettled:
            return Admission()
        if name in self.records or self.closed:
            return Admission(release=self.best is None or self.best.checkpoint != name)
        self._unsettled[name] = None
        waiting = sorted((n for n, at in self._unsettled.items() if at is None), key=int)
        skip = waiting[: max(0, len(waiting) - self.waiting_limit)]
        return Admission(submit=name not in skip, skip=skip, newest=waiting[-1])

    def started(self, name: str, node: str, now: float) -> bool:
        """``name``'s task has capacity and asks whether to run: yes while it waits for it here; no once it has an
        outcome (skipped or cancelled while it waited, its word crossing ours), so a skipped one never runs. Asked
        again, it answers the same; the start is the first ask's."""
        if name not in self._unsettled:
            return False
        if self._unsettled[name] is None:
            self._unsettled[name] = (now, node)
        return True

    def overdue(self, now: float) -> list[str]:
        return [n for n, at in self._unsettled.items() if at is not None and now - at[0] > self.timeout_s]

    def settle(self, record: EvalRecord, now: float) -> tuple[bool, str | None]:
        """Whether ``record`` is its checkpoint's outcome (False: it had one, or was never submitted), and the
        checkpoint whose hold is no longer needed: this one, or the best it replaces."""
        name = record.checkpoint
        if name not in self._unsettled:
            return False, None
        started = self._unsettled.pop(name)
        if started is not None:
            record.node = record.node or started[1]
            if record.seconds is None:
                record.seconds = now - started[0]
        self.records[name] = record
        self.best, released = kept_best(self.best, record, self.metric)
        return True, released

    def never_started(self, name: str, record: EvalRecord) -> None:
        """A checkpoint committed but never announced, at a stop: recorded, never evaluated."""
        if name not in self._unsettled and name not in self.records:
            self.records[name] = record

    def close(self) -> None:
        """The run has ended: what is announced from now on is released, not evaluated."""
        self.closed = True

    def unsettled(self) -> list[str]:
        return list(self._unsettled)

    def running(self) -> dict[str, tuple[float, str]]:
        return {n: at for n, at in self._unsettled.items() if at is not None}


def kept_best(best: EvalRecord | None, record: EvalRecord, metric: str) -> tuple[EvalRecord | None, str | None]:
    """The best after ``record``, and the checkpoint no longer worth holding: ``record`` unless it is the new best
    (a tie keeps the earlier one), else the best it replaces (None if there was none)."""
    if not metric or metric not in record.metrics:
        return best, record.checkpoint
    if best is not None and BEST_METRICS[metric](best.metrics[metric], record.metrics[metric]) == best.metrics[metric]:
        return best, record.checkpoint
    return record, best.checkpoint if best is not None else None
