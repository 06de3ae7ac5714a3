"""Observes LeRobot's training loop from outside (a ``LoopHooks``): per-step loss and loop throughput,
reported to Ray Train."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from raycluster.lerobot.api import LoopHooks

# Losses averaged at each end of the run, so that one noisy batch does not decide "the loss fell".
LOSS_WINDOW = 5


@dataclass
class StepRecorder(LoopHooks):
    samples_per_step: int
    """batch_size x world_size: what one loop step consumes across the cluster."""
    report_every: int
    report: Callable[[dict], None]
    losses: list[float] = field(default_factory=list)
    policy_class: str | None = None
    """The class of the model LeRobot steps: ``DistributedDataParallel`` when DDP wraps it."""
    first_step: int | None = None
    last_step: int | None = None
    _t_first_end: float | None = None
    _t_last_end: float | None = None

    def on_step(self, step: int, loss: float) -> None:
        now = time.perf_counter()
        if self.first_step is None:
            self.first_step, self._t_first_end = step, now
        self.last_step, self._t_last_end = step, now
        self.losses.append(loss)
        if step % self.report_every == 0:
            self.report({"step": step, "loss": loss, "samples_per_s": self.samples_per_s})

    @property
    def samples_per_s(self) -> float | None:
        """Loop throughput from the end of the first step to the end of the last: start-up and the
        first step's one-off costs (allocations, DDP bucket building) are left out."""
        if self.first_step is None or self.last_step == self.first_step:
            return None
        steps = self.last_step - self.first_step
        return steps * self.samples_per_step / (self._t_last_end - self._t_first_end)

    @property
    def loss_first(self) -> float | None:
        window = self.losses[:LOSS_WINDOW]
        return sum(window) / len(window) if window else None

    @property
    def loss_last(self) -> float | None:
        window = self.losses[-LOSS_WINDOW:]
        return sum(window) / len(window) if window else None

    def after_step(self, step: int, loss: float, policy) -> None:
        self.policy_class = type(policy).__name__
        self.on_step(step, loss)
