"""The evaluation keeper: an actor on the driver's node that runs one evaluation task per published checkpoint
and keeps their outcomes. Training never waits for it: the checkpoint keeper tells it of a commit without
waiting, and nothing here calls into training.

Its protocol with the checkpoint keeper: a checkpoint is held against retention from its commit (by the
checkpoint keeper itself, before it tells anyone) until its evaluation has an outcome, and the best one for as
long as it is the best. A ``published`` call that is lost or late is made good at ``finish``, which asks the
checkpoint keeper for every held checkpoint. Every wait has a deadline: a task's own (``timeout_s`` from its
start), and the end's (``timeout_s`` after a normal end, none after a stop: pending ones are cancelled).
"""

from __future__ import annotations

import logging
import threading
import time

import ray
from ray.exceptions import TaskCancelledError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.errors import UsageError
from raycluster.evals.book import EvalBook
from raycluster.evals.plan import EvalPlan
from raycluster.evals.records import CANCELLED, FAILED, SKIPPED, TIMED_OUT, VALIDATED, EvalRecord, curve_metrics
from raycluster.evals.resources import wanted
from raycluster.evals.task import evaluate_checkpoint
from raycluster.faults import NO_FAULTS, Faults

log = logging.getLogger(__name__)

POLL_S = 0.5
STOPPED_WAIT_S = 5.0
"""The longest a stopped run's end waits for any one thing here: the poller's last round, the curves' last points."""


def cause(exc: BaseException) -> str:
    """One line: the task's own exception, not Ray's wrapping with the remote traceback."""
    inner = getattr(exc, "cause", None) or exc
    lines = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {lines[0] if lines else ''}"


@ray.remote(num_cpus=0, max_concurrency=8)
class EvalKeeper:
    def __init__(self, plan: EvalPlan, checkpoint_keeper, curves=None, task=evaluate_checkpoint, faults=NO_FAULTS):
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        self.plan, self.keeper, self.curves, self.task = plan, checkpoint_keeper, curves, task
        self.faults: Faults = faults
        self.me = ray.get_runtime_context().current_actor
        self._lock = threading.Lock()
        self._book = EvalBook(plan.metric, plan.timeout_s)
        """Every decision; read and changed under ``_lock`` only."""
        self._tasks: dict[str, ray.ObjectRef] = {}
        """The task of each evaluation the book has without an outcome."""
        self._ending = threading.Event()
        self._poller = threading.Thread(target=self._poll_until_ending, name="eval-poller", daemon=True)
        self._poller.start()

    def published(self, name: str) -> None:
        unsubmitted = None
        with self._lock:
            admission = self._book.admit(name)
            if admission.submit:
                try:
                    self._tasks[name] = self.task.options(**self.plan.options).remote(
                        self.keeper, self.me, name, self.plan, self.faults
                    )
                except Exception as exc:  # the book has it: it gets an outcome, so its hold goes
                    unsubmitted = EvalRecord(name, FAILED, error=f"its evaluation could not be submitted: {exc}")
        self._settle(unsubmitted)
        if admission.release:
            self.keeper.unhold.remote(name)
        for older in admission.skip:
            why = f"checkpoint {admission.newest} came before it found capacity; the newer one goes first"
            self._stop(older, SKIPPED, why)

    def started(self, name: str, node: str) -> bool:
        """Whether ``name``'s task, which has its capacity now, is to run (``evals.task.begin``)."""
        with self._lock:
            return self._book.started(name, node, time.monotonic())

    # -- outcomes ---------------------------------------------------------------------------------
    def _poll_until_ending(self) -> None:
        while not self._ending.wait(POLL_S):
            try:
                self._poll()
            except Exception:  # one bad round must not end the polling: the holds hang on it
                log.exception("evaluations: a polling round failed")

    def _poll(self) -> None:
        with self._lock:
            by_ref = {ref: name for name, ref in self._tasks.items()}
        if by_ref:
            ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
            for ref in ready:
                self._settle(self._outcome(by_ref[ref], ref))
        with self._lock:
            overdue = self._book.overdue(time.monotonic())
        for name in overdue:
            self._stop(name, TIMED_OUT, f"still running after --cluster.eval_timeout_s={self.plan.timeout_s:g}")

    def _outcome(self, name: str, ref) -> EvalRecord | None:
        try:
            result = ray.get(ref, timeout=0)
        except TaskCancelledError:
            return None  # cancelled here: recorded by whoever cancelled it
        except Exception as exc:
            return EvalRecord(name, FAILED, error=cause(exc))
        if result is None:
            return None  # told not to run: it had its outcome already
        return EvalRecord(name, VALIDATED, result["metrics"], result["seconds"], result["node"])

    def _stop(self, name: str, status: str, why: str) -> None:
        """Settled first (an outcome that came meanwhile stands), then its task cancelled, if it has one."""
        with self._lock:
            ref = self._tasks.get(name)
        self._settle(EvalRecord(name, status, error=why))
        if ref is not None:
            try:
                ray.cancel(ref, force=status != SKIPPED)  # a task still waiting for capacity goes without a kill
            except Exception as exc:  # its outcome is recorded and its hold released either way
                log.warning("evaluations: the task of checkpoint %s could not be cancelled: %s", name, exc)

    def _settle(self, record: EvalRecord | None) -> None:
        if record is None:
            return
        with self._lock:
            taken, released = self._book.settle(record, time.monotonic())
            if not taken:
                return
            self._tasks.pop(record.checkpoint, None)
        (log.info if record.status == VALIDATED else log.warning)(record.log_line())
        if self.curves is not None and record.metrics:
            self.curves.log.remote(record.step, curve_metrics(record))
        if released is not None:
            self.keeper.unhold.remote(released)

    def _never_started(self, name: str) -> None:
        with self._lock:
            self._book.never_started(name, EvalRecord(name, CANCELLED, error="the run stopped before it was evaluated"))

    # -- the end ----------------------------------------------------------------------------------
    def finish(self, stopped: bool) -> dict:
        """Every checkpoint's outcome and the best, once each has one. After a normal end, what is still
        running may finish within ``timeout_s`` (the last checkpoint counts); after a stop nothing is waited for
        (the driver's stop budget is its save's): what is pending is cancelled, in seconds."""
        try:  # what was committed, but whose announcement had not arrived
            held = ray.get(self.keeper.evaluation_holds.remote(), timeout=STOPPED_WAIT_S if stopped else 60)
        except Exception as exc:
            log.warning("evaluations: the checkpoints held for evaluation could not be listed: %s", exc)
            held = []
        for name in held:
            if stopped:
                self._never_started(name)
            else:
                self.published(name)
        with self._lock:
            self._book.close()  # what is announced from now on is released, not evaluated
        self._ending.set()
        self._poller.join(timeout=STOPPED_WAIT_S if stopped else 30)
        deadline = time.monotonic() + (0 if stopped else self.plan.timeout_s)
        while self._tasks and time.monotonic() < deadline:
            self._poll()
            time.sleep(POLL_S)
        self._poll()  # what finished since the poller's last round is an outcome, not a cancellation
        why = "the run stopped before it ended" if stopped else "not done when the run ended"
        with self._lock:
            unsettled = self._book.unsettled()
        for name in unsettled:
            self._stop(name, CANCELLED, why)
        with self._lock:  # nothing is left to settle: every later word is refused, so these are final
            best, records = self._book.best, [self._book.records[n] for n in sorted(self._book.records, key=int)]
        self._release_holds(best, stopped)
        if self.curves is not None:  # before the driver finishes the curves: this caller's points are all in
            if best is not None:
                self.curves.mark.remote(
                    best.step, "best", {f"eval/best_{self.plan.metric}": best.metrics[self.plan.metric]}
                )
            try:
                ray.get(self.curves.caught_up.remote(), timeout=STOPPED_WAIT_S if stopped else 60)
            except Exception as exc:  # the curves never cost the outcomes
                log.warning("the evaluations' last points may be missing from the curves: %s", exc)
        return {
            "evaluations": [record.as_summary() for record in records],
            "best": None if best is None else best_entry(best, self.plan.metric),
        }

    def _release_holds(self, best: EvalRecord | None, stopped: bool) -> None:
        """Every hold but the best's, released by the checkpoint keeper before the outcomes are returned,
        announcements that crossed the end included; a later commit is held for no one."""
        try:
            ray.get(
                self.keeper.detach_evals.remote(best.checkpoint if best else None),
                timeout=STOPPED_WAIT_S if stopped else 60,
            )
        except Exception as exc:  # a keeper that cannot answer holds nothing that outlives the run
            log.warning("evaluations: the checkpoints held for them could not be released: %s", exc)


def best_entry(best: EvalRecord, metric: str) -> dict:
    return {"checkpoint": best.checkpoint, "step": best.step, "metric": metric, "value": best.metrics[metric]}


def check_capacity(plan: EvalPlan) -> None:
    """Refuse resources no node offers: its tasks would wait for them for the whole run."""
    need = wanted(plan.options)
    nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
    if not any(all(offer.get(k, 0) >= v for k, v in need.items()) for offer in nodes):
        offered = sorted({k for offer in nodes for k in offer if not k.startswith("node:")})
        raise UsageError(
            f"--cluster.eval_resources asks for {need} on one node, which no node of the cluster offers (they have "
            f"{', '.join(offered)}): ask for less, or start the cluster with them"
        )


def evals_for_run(plan: EvalPlan | None, checkpoint_keeper, curves, task=evaluate_checkpoint, faults=NO_FAULTS):
    """The run's evaluation keeper on the caller's node, attached to the checkpoint keeper; None without a plan.
    ``task``: the Ray task that evaluates one checkpoint (the protocol's tests give a stand-in)."""
    if plan is None:
        return None
    check_capacity(plan)
    node_id = ray.get_runtime_context().get_node_id()
    evals = EvalKeeper.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)).remote(
        plan, checkpoint_keeper, curves, task, faults
    )
    ray.get(checkpoint_keeper.attach_evals.remote(evals), timeout=60)
    return evals
