"""Observes LeRobot's training loop from outside: per-step loss and loop throughput, reported to Ray Train.

LeRobot's ``train`` looks ``update_policy`` up in its module at every step, so wrapping that one
function lets us watch every optimizer step without forking the loop.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

# Losses averaged at each end of the run, so that one noisy batch does not decide "the loss fell".
LOSS_WINDOW = 5


@dataclass
class StepRecorder:
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

    @contextlib.contextmanager
    def observing(self, lerobot_train: ModuleType) -> Iterator[None]:
        original = lerobot_train.update_policy

        def observed(train_metrics, policy, *args, **kwargs):
            result = original(train_metrics, policy, *args, **kwargs)
            self.policy_class = type(policy).__name__
            # LeRobot increments its tracker right after this returns: this step is steps + 1.
            self.on_step(train_metrics.steps + 1, train_metrics.loss.val)
            return result

        lerobot_train.update_policy = observed
        try:
            yield
        finally:
            lerobot_train.update_policy = original
