"""The machine-readable outcome of a run: ``<output_dir>/raycluster_summary.json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

SUMMARY_NAME = "raycluster_summary.json"


@dataclass
class RunSummary:
    world_size: int
    steps: int
    """Steps asked for (LeRobot's ``--steps``)."""
    final_step: int | None
    samples_per_s: float | None
    """Training-loop throughput across the cluster, start-up excluded."""
    loss_first: float | None
    """Mean loss of the first 5 steps this run made (rank 0's batches)."""
    loss_last: float | None
    """Mean loss of the last 5 steps."""
    checkpoints: list[int]
    """Steps saved complete: in checkpoint_dir when the keeper owns one, else in output_dir."""
    resumed_from: int | None
    restarts: int
    wall_s: float
    backend: str
    policy_wrapper: str | None
    mixed_precision: str
    effective_batch_size: int
    output_dir: str
    uploads_skipped: list[str]
    """Checkpoints superseded by a newer one before their upload started (the queue holds one)."""
    stopped_by: str | None = None
    """The signal that stopped the run before ``steps`` (SIGTERM, SIGINT); ``final_step`` is where, and
    ``checkpoints`` says whether that step was saved."""
    curves: str | None = None
    """The run's picture (loss and samples/s over steps), when curves were recorded; ``raycluster curves
    <output_dir>`` opens the dashboard."""
    uploads_failed: dict[str, str] = field(default_factory=dict)
    """Checkpoint -> why its upload failed. A later published checkpoint covers it; a lost newest one
    fails the run (exit 1, the step and the cause in the error)."""

    def write(self, output_dir: Path) -> Path:
        path = Path(output_dir) / SUMMARY_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path


def read_summary(output_dir: Path) -> dict:
    return json.loads((Path(output_dir) / SUMMARY_NAME).read_text())
