"""The evaluation keeper in the retention simulation: the project's own ``EvalBook`` takes every decision, and this
class carries them out as ``EvalKeeper`` does with Ray. An evaluation's task takes one of ``eval_slots`` when it is
free (Ray's capacity), oldest first, and asks the book over the network whether to begin (``evals.task.begin``): it
may have been skipped or cancelled meanwhile. Begun, it validates or fails after its own time, or is timed out
``EVAL_TIMEOUT_S`` after its start; a release of a hold is a message to the checkpoint keeper (late, repeated,
reordered). The end is
``EvalKeeper.finish``'s: after a normal end every held checkpoint is published once more (an announcement lost or
still on its way is made good), the book is closed, and after the timeout what is still pending is cancelled; after a
stop, the held ones not announced are recorded as never evaluated and what is pending is cancelled at once.

What must hold, after every event: no more evaluations wait than the book allows, those the book counts as running
hold a slot, and no more run than there are slots; an evaluation skipped never did any work; an outcome, once
recorded, is never replaced; the best is the lowest loss of those that validated. And once all is
quiet: every checkpoint committed has exactly one outcome, and none is pending.
"""

from __future__ import annotations

from collections.abc import Callable

from raycluster.dsim.scheduler import Scheduler
from raycluster.dsim.sweep import InvariantBroken
from raycluster.evals.book import EvalBook
from raycluster.evals.records import CANCELLED, FAILED, SKIPPED, TIMED_OUT, VALIDATED, EvalRecord

EVAL_TIMEOUT_S = 60.0  # an evaluation's timeout from its start, and how long the end waits for those under way
SLOW_S = (50.0, 400.0)  # how long a slow evaluation takes: many save intervals


class SimEvaluations:
    def __init__(self, sim: Scheduler, profile, unhold: Callable[[str], None]):
        self.sim, self.profile, self.unhold = sim, profile, unhold
        self.book = EvalBook("eval_loss", EVAL_TIMEOUT_S)
        self.queue: list[str] = []
        """Submitted, waiting for a slot, oldest first (a skipped one is passed over)."""
        self.running: set[str] = set()
        """Tasks holding a slot: asking to begin, or begun."""
        self.worked: set[str] = set()
        """Evaluations whose task was told to begin, and began its work."""
        self.seen: dict[str, EvalRecord] = {}

    def published(self, name: str) -> None:
        admission = self.book.admit(name)
        if admission.release:
            self._release(name)
        if admission.submit:
            self.queue.append(name)
        waiting = [n for n in self.book.unsettled() if n not in self.book.running() and n not in admission.skip]
        if admission.skip and int(max(admission.skip)) > int(min(waiting)):
            raise InvariantBroken(f"{admission.skip} skipped while the older {min(waiting)} waits on")
        for older in admission.skip:
            self._stop(EvalRecord(older, SKIPPED, error=f"checkpoint {admission.newest} came first"))
        self._start_waiting()

    def _start_waiting(self) -> None:
        while self.queue and len(self.running) < self.profile.eval_slots:
            name = self.queue.pop(0)
            if name not in self.book.unsettled():  # skipped while it waited
                continue
            self.running.add(name)
            self.sim.send(lambda n=name: self._ask_to_begin(n))

    def _ask_to_begin(self, name: str) -> None:
        go = self.book.started(name, "sim", self.sim.now)
        self.sim.send(lambda: self._told(name, go))

    def _told(self, name: str, go: bool) -> None:
        if name not in self.running or name in self.worked:  # settled since (its task cancelled), or a repeat
            return
        if not go:
            self.running.discard(name)
            self._start_waiting()
            return
        self.worked.add(name)
        slow = self.sim.rng.random() < self.profile.slow_evaluations
        took = self.sim.rng.uniform(*(SLOW_S if slow else self.profile.evaluation_s))
        self.sim.at(took, lambda: self._done(name))
        self.sim.at(EVAL_TIMEOUT_S + 0.001, self._time_out)  # the keeper's poller, once the timeout is due

    def _done(self, name: str) -> None:
        if name not in self.running:  # its cancellation came first
            return
        self.running.discard(name)
        failed = self.sim.rng.random() < self.profile.failing_evaluations
        metrics = {} if failed else {"eval_loss": self.sim.rng.random()}
        self._settle(EvalRecord(name, FAILED if failed else VALIDATED, metrics))
        self._start_waiting()

    def _time_out(self) -> None:
        for name in self.book.overdue(self.sim.now):
            self._stop(EvalRecord(name, TIMED_OUT, error="still running"))

    def _stop(self, record: EvalRecord) -> None:
        """Settled by the keeper, then its task cancelled: a message, so the task may ask to begin meanwhile."""
        self._settle(record)
        self.sim.send(lambda: self._cancelled(record.checkpoint))

    def _cancelled(self, name: str) -> None:
        if name in self.running:
            self.running.discard(name)
            self._start_waiting()

    def _settle(self, record: EvalRecord) -> None:
        taken, released = self.book.settle(record, self.sim.now)
        if taken and released is not None:
            self._release(released)

    def _release(self, name: str) -> None:
        self.sim.send(lambda: self.unhold(name))

    def finish(self, held: list[str], stopped: bool) -> None:
        """``EvalKeeper.finish`` up to its wait: after a normal end every held checkpoint is published again; after
        a stop, one not announced yet is recorded as never evaluated (nothing new starts)."""
        for name in held:
            if stopped:
                self.book.never_started(name, EvalRecord(name, CANCELLED, error="the run stopped first"))
            else:
                self.published(name)
        self.book.close()

    def end(self) -> str | None:
        """Past the end's wait: what is pending is cancelled; the best checkpoint, which stays held."""
        for name in self.book.unsettled():
            self._stop(EvalRecord(name, CANCELLED, error="not done when the run ended"))
        return self.book.best.checkpoint if self.book.best else None

    def check(self) -> None:
        book = self.book
        waiting = [n for n in book.unsettled() if n not in book.running()]
        if len(waiting) > book.waiting_limit or not set(book.running()) <= self.running:
            raise InvariantBroken(f"{len(waiting)} evaluations wait, {sorted(book.running())} run: {self.running}")
        if len(self.running) > self.profile.eval_slots:
            raise InvariantBroken(f"{sorted(self.running)} hold slots, of {self.profile.eval_slots}")
        for name, record in book.records.items():
            if self.seen.setdefault(name, record) is not record:
                raise InvariantBroken(f"the outcome of {name} was replaced: {self.seen[name]} by {record}")
            if record.status == SKIPPED and name in self.worked:
                raise InvariantBroken(f"checkpoint {name} was skipped after its evaluation began")
        losses = [r.metrics["eval_loss"] for r in book.records.values() if "eval_loss" in r.metrics]
        if losses and (book.best is None or book.best.metrics["eval_loss"] != min(losses)):
            raise InvariantBroken(f"the best is {book.best}, not the lowest loss of {sorted(losses)}")

    def check_quiet(self, committed: set[str]) -> None:
        if self.book.unsettled() or set(self.book.records) != committed:
            missing = sorted(committed - set(self.book.records))
            raise InvariantBroken(f"pending {self.book.unsettled()}; committed without an outcome {missing}")
