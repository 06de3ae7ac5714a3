"""What goes into each Ray Train worker (``WorkerConfig``, from the driver) and what rank 0 returns
(``WorkerResult``, Ray Train's ``Result.return_value``)."""

from __future__ import annotations

from dataclasses import dataclass

from raycluster.lerobot.lines import LineSettings
from raycluster.training.summary import Measured


@dataclass(frozen=True)
class WorkerConfig:
    lerobot_args: list[str]
    use_gpu: bool
    mixed_precision: str
    journal: object
    """RunJournal actor handle."""
    line_settings: LineSettings = LineSettings()
    """Ours that the installed line checks LeRobot's resolved config against."""
    checkpoint_keeper: object | None = None
    """CheckpointKeeper owning --cluster.checkpoint_dir, when set."""
    part_stores: dict | None = None
    """Node id -> that node's PartStore of --cluster.checkpoint_dir, when set."""
    curves: object | None = None
    """CurveKeeper that records the run's curves, unless --cluster.track=none (or trackio is missing)."""
    sharding: str = "none"
    """--cluster.sharding: the parallelism degrees each rank fills in from where the ranks landed."""
    progress: object | None = None
    """ProgressBoard the watchdog reads, unless --cluster.hang_timeout_s=0."""
    beats_every_s: float = 5.0


@dataclass(frozen=True, kw_only=True)
class WorkerResult(Measured):
    """What rank 0 returns to the driver (Ray Train's ``Result.return_value``) when LeRobot trained."""

    steps: int
    """``--steps`` as LeRobot resolved it."""
    batch_size: int
    """Each rank's ``--batch_size`` as LeRobot resolved it."""

    lost: str | None = None
    """Why the newest checkpoint is not in the checkpoint root, when it is not."""
    interrupted_at: int | None = None
    train_s: float = 0.0
