"""Where a run's time goes: when each phase of its start-up, training, teardown and every recovery ended, in
seconds since the command started.

The driver, rank 0 and Ray Train's controller (a callback) each tell the run's journal when a phase of theirs
ends, as wall-clock times (every process of a run shares the clock: one machine, or hosts kept in sync by
NTP); the driver turns them into the summary's ``phases`` and ``recoveries`` and marks them in the curves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ray
from ray.train import UserCallback

from raycluster.lerobot.api import LoopHooks

log = logging.getLogger(__name__)

START_UP = (
    "flags_checked",  # the flags read and checked on the driver (LeRobot checks them on the ranks)
    "cluster_ready",  # Ray started (private cluster) or joined
    "worker_group_ready",  # every Ray Train worker runs our loop, process group up (rank 0's first line)
    "start_agreed",  # where to start from, agreed by every rank
    "lerobot_set_up",  # LeRobot's dataset, policy and optimizer made, on rank 0: its first step begins
    "first_step",
    "last_step",
    "final_checkpoint_published",  # the run's checkpoints published by the keeper
    "training_returned",  # Ray Train's fit() returned on the driver
    "evaluations_done",  # the evaluations still running when training returned, waited for
    "summary_written",  # Ray shut down (or left), the summary written: the command ends
)
RECOVERY = ("failure_seen", "worker_group_ready", "checkpoint_in_place", "lerobot_set_up", "first_resumed_step")
"""Each restart's phases: ``failure_seen`` by Ray Train's controller, the rest by the new attempt's rank 0."""
RUN_END = ("last_step", "final_checkpoint_published")
"""Phases the run's last attempt decides, whichever it is."""
IN_RECOVERY = {"first_step": "first_resumed_step", "start_agreed": "checkpoint_in_place"}


@dataclass(frozen=True)
class Phase:
    name: str
    at: float
    """time.time() when it ended."""
    attempt: int
    """The attempt it belongs to (0: the driver's own); a ``failure_seen`` belongs to the attempt that failed."""
    step: int = 0
    """The training step it happened at, for its mark in the curves."""


@dataclass(frozen=True)
class Timeline:
    """A run's phases, as the summary writes them."""

    phases: dict[str, float]
    """START_UP's phases, in seconds since the command started."""
    recoveries: list[dict[str, float]] = field(default_factory=list)
    """One per restart: RECOVERY's phases in seconds since the command started, and ``seconds`` from the
    failure seen to the first resumed step."""


def timeline(recorded: list[Phase], started: float) -> Timeline:
    phases: dict[str, float] = {}
    restarts: dict[int, dict[str, float]] = {}
    for phase in sorted(recorded, key=lambda p: p.at):
        seconds = round(phase.at - started, 2)
        if phase.name == "failure_seen":
            restarts.setdefault(phase.attempt, {}).setdefault(phase.name, seconds)
            continue
        if phase.name in RUN_END:
            phases[phase.name] = seconds
        elif phase.attempt <= 1:
            phases.setdefault(phase.name, seconds)
        if phase.attempt > 1:
            restarts.setdefault(phase.attempt - 1, {}).setdefault(IN_RECOVERY.get(phase.name, phase.name), seconds)
    recoveries = []
    for restart in sorted(restarts):
        times = {name: restarts[restart][name] for name in RECOVERY if name in restarts[restart]}
        if "failure_seen" in times and "first_resumed_step" in times:
            times["seconds"] = round(times["first_resumed_step"] - times["failure_seen"], 2)
        recoveries.append(times)
    return Timeline({name: phases[name] for name in START_UP if name in phases}, recoveries)


def mark_phases(curves, recorded: list[Phase], started: float) -> None:
    """Every phase so far as an event in the run's curves, at the step it happened: ``phase/<name>`` in
    seconds since the command started, with the attempt it belongs to."""
    if curves is None:
        return
    for phase in sorted(recorded, key=lambda p: p.at):
        metrics = {f"phase/{phase.name}": round(phase.at - started, 2), "phase/attempt": float(phase.attempt)}
        curves.mark.remote(phase.step, "phase", metrics)


def say(phases: dict[str, float], recoveries: list[dict[str, float]]) -> None:
    """One line for the run's start-up and end, one per recovery."""
    log.info("phases (s since the command started): %s", ", ".join(f"{k} {v:.1f}" for k, v in phases.items()))
    for n, recovery in enumerate(recoveries, 1):
        log.info(
            "restart %d (s since the command started): %s", n, ", ".join(f"{k} {v:.1f}" for k, v in recovery.items())
        )


class LoopPhases(LoopHooks):
    """The phases inside LeRobot's ``train`` (set up: its first step begins; first and last step), each
    passed to ``tell``: rank 0 tells the run's journal; the benchmark's plain torchrun run keeps them. Every
    step finished goes to ``reached`` (attempt, step), when given: the last step of a group that fails is known
    even when its rank 0 is killed; and the time the loop was blocked saving a checkpoint to ``saved`` (attempt,
    seconds), said at the next step (a save after the last step is the run's end, not its training)."""

    def __init__(
        self,
        tell: Callable[[Phase], object],
        attempt: int,
        reached: Callable[[int, int], object] | None = None,
        saved: Callable[[int, float], object] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.tell, self.attempt, self.reached, self.saved, self.clock = tell, attempt, reached, saved, clock
        self.last: Phase | None = None
        self._saving_since: float | None = None
        self._saving_s = 0.0

    def before_step(self) -> None:
        if self.last is None:
            self.tell(Phase("lerobot_set_up", self.clock(), self.attempt))

    def after_step(self, step: int, loss: float, policy) -> None:
        if self.last is None:
            self.tell(Phase("first_step", self.clock(), self.attempt, step))
        self.last = Phase("last_step", self.clock(), self.attempt, step)
        if self.reached is not None:
            self.reached(self.attempt, step)
        if self._saving_s and self.saved is not None:
            self.saved(self.attempt, self._saving_s)
        self._saving_s = 0.0

    def checkpoint_started(self, step_dir: Path) -> None:
        self._saving_since = self.clock()

    def checkpoint_saved(self, step_dir: Path) -> None:
        if self._saving_since is not None:
            self._saving_s += self.clock() - self._saving_since
            self._saving_since = None

    def close(self) -> None:
        if self.last is not None:
            self.tell(self.last)


class FailureSeen(UserCallback):
    """Ray Train's controller calls this when a worker of the group failed (its exception, or its death)."""

    def __init__(self, journal):
        self.journal = journal

    def after_exception(self, run_context, worker_exceptions) -> None:
        # The failed group's ranks are no longer watched from here (the watchdog asks the journal at each check).
        # Waited for, a little: recorded before the next group's ranks ask the journal for their number.
        ray.wait([self.journal.failure_seen.remote(time.time())], timeout=10)
