"""One checkpoint's evaluation outcome: what the summary's ``evaluations`` hold and what the log says."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Ray Train's names (``ray.train.ReportedCheckpointStatus``) for what Ray's own validation would record.
VALIDATED = "VALIDATED"
FAILED = "VALIDATION_FAILED"
TIMED_OUT = "VALIDATION_TIMEOUT"
SKIPPED = "SKIPPED"
"""A newer checkpoint arrived while this one still waited for capacity: the newer one is evaluated instead."""
CANCELLED = "CANCELLED"
"""The run stopped (a signal) before this evaluation ended, or ended while it still ran past ``eval_timeout_s``:
a stop never waits for evaluations."""


@dataclass
class EvalRecord:
    checkpoint: str
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None
    """From the task's start (on its node) to its result."""
    node: str | None = None
    """The IP of the node the task ran on."""
    error: str | None = None

    @property
    def step(self) -> int:
        return int(self.checkpoint)

    def as_summary(self) -> dict:
        return {"step": self.step, **asdict(self)}

    def log_line(self) -> str:
        where = f" ({self.seconds:.1f}s on {self.node})" if self.seconds is not None else ""
        if self.status != VALIDATED:
            return f"evaluation of checkpoint {self.checkpoint}: {self.status}: {self.error}{where}"
        shown = ", ".join(f"{name} {value:.4g}" for name, value in self.metrics.items())
        return f"evaluation of checkpoint {self.checkpoint}: {shown}{where}"


def curve_metrics(record: EvalRecord) -> dict[str, float]:
    """The curves' points of a record, at its checkpoint's step, in a panel family of their own."""
    shown = (n for n in record.metrics if n not in ("eval_frames", "n_episodes"))
    return {f"eval/{name.removeprefix('eval_')}": record.metrics[name] for name in shown}
