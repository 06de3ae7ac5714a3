"""The evaluations' own settings: ``--cluster.async_eval`` and the flags beside it, as the evaluation side
receives them (``ClusterConfig.evals()``), with their checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from raycluster.errors import UsageError
from raycluster.evals.resources import BEST_METRICS, task_options


@dataclass(frozen=True)
class EvalSettings:
    enabled: bool = False
    """``--cluster.async_eval``: every published checkpoint is evaluated as a Ray task."""
    resources: str = '{"CPU": 1}'
    """``--cluster.eval_resources``: what each task takes, as JSON the way Ray counts it."""
    timeout_s: float = 1800.0
    """``--cluster.eval_timeout_s``."""
    keep_best: str = ""
    """``--cluster.keep_best``: the metric that picks the model; empty: the last checkpoint is the model."""

    def check(self, checkpoint_dir: str) -> None:
        """Refused with the flag named: evaluations need the checkpoints the keeper publishes in
        ``checkpoint_dir``."""
        task_options(self.resources)
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise UsageError(f"--cluster.eval_timeout_s must be a number of seconds > 0, got {self.timeout_s}")
        if self.keep_best and self.keep_best not in BEST_METRICS:
            names = ", ".join(f"{n} ({'lower' if d is min else 'higher'} is better)" for n, d in BEST_METRICS.items())
            raise UsageError(f"--cluster.keep_best={self.keep_best}: not a metric; one of {names}")
        if self.keep_best and not self.enabled:
            raise UsageError(f"--cluster.keep_best={self.keep_best} needs --cluster.async_eval=true")
        if self.enabled and not checkpoint_dir:
            raise UsageError(
                "--cluster.async_eval=true evaluates the checkpoints the keeper publishes: give --cluster.checkpoint_dir"
            )
