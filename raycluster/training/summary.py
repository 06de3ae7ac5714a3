"""The machine-readable outcome of a run: ``<output_dir>/raycluster_summary.json``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

SUMMARY_NAME = "raycluster_summary.json"


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What rank 0 measured of the run: returned by the workers, carried into the summary as it is."""

    world_size: int
    backend: str
    policy_wrapper: str | None
    mixed_precision: str
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
    uploads_skipped: list[str] = field(default_factory=list)
    """Checkpoints superseded by a newer one before their upload started (the queue holds one)."""
    uploads_failed: dict[str, str] = field(default_factory=dict)
    """Checkpoint -> why its upload failed. A later published checkpoint covers it; a lost newest one
    fails the run (exit 1, the step and the cause in the error)."""


@dataclass(frozen=True, kw_only=True)
class RunSummary(Measured):
    steps: int
    """Steps asked for (LeRobot's ``--steps``)."""
    restarts: int
    wall_s: float
    effective_batch_size: int
    output_dir: str
    stopped_by: str | None = None
    """The signal that stopped the run before ``steps`` (SIGTERM, SIGINT); ``final_step`` is where, and
    ``checkpoints`` says whether that step was saved."""
    phases: dict[str, float] = field(default_factory=dict)
    """When each phase of the run ended, in seconds since the command started (``phases.START_UP``):
    cluster ready, worker group ready, LeRobot set up, first and last step, ... summary written."""
    recoveries: list[dict[str, float]] = field(default_factory=list)
    """One per restart: failure seen, new worker group ready, checkpoint in place, LeRobot set up, first
    resumed step (seconds since the command started), and ``seconds`` from the failure to that step."""
    curves: str | None = None
    """The run's picture (loss and samples/s over steps), when curves were recorded; ``raycluster curves
    <output_dir>`` opens the dashboard."""
    evaluations: list[dict] = field(default_factory=list)
    """``--cluster.async_eval``: one entry per published checkpoint, oldest first: its ``step``, ``status``
    (``VALIDATED``, ``VALIDATION_FAILED``, ``VALIDATION_TIMEOUT``, ``SKIPPED``, ``CANCELLED``), ``metrics``
    (``eval_loss``; ``pc_success``, ``avg_sum_reward``, ``avg_max_reward``), ``seconds``, ``node`` and ``error``."""
    best: dict | None = None
    """``--cluster.keep_best``: the best checkpoint (``checkpoint``, ``step``, ``metric``, ``value``) and where it
    was exported as the model (``exported_to``)."""
    ledger: dict | None = None
    """Where the job's time went, across its starts (``raycluster/ledger.py``): each start's parts and steps, the
    steps redone and the ``goodput``; kept beside the checkpoints, so a restarted job continues it."""

    def write(self, output_dir: Path) -> Path:
        path = Path(output_dir) / SUMMARY_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path


def read_summary(output_dir: Path) -> dict:
    return json.loads((Path(output_dir) / SUMMARY_NAME).read_text())
