"""What the head runs: which Ray job script, and with which flags."""

from __future__ import annotations

import os
from pathlib import Path

from raycluster.cluster_config import GROUP, ClusterConfig
from raycluster.errors import UsageError
from raycluster.layout import CURVES_PORT, SCRATCH, SOURCE_DIR
from raycluster.ledger import process_started
from raycluster.sagemaker.entry_settings import NO_JOB, EntrySettings
from raycluster.sagemaker.topology import Topology
from raycluster.settings import split_group

PROBE_SCRIPT = SOURCE_DIR / "jobs" / "nccl_probe.py"
PROBE_FLAGS = ("--cluster.num_workers", "--cluster.use_gpu", "--cluster.address", "--cluster.cpus_per_worker")
"""The training job's flags that the preflight probe takes too: the same workers on the same devices."""


CHECKPOINT_ROOT = "lerobot"
"""The checkpoint root under SageMaker's checkpoint directory unless ``--cluster.checkpoint_dir`` says otherwise;
the job's ledger is kept beside its checkpoints (``raycluster status`` reads it from S3 there)."""


def job_script(settings: EntrySettings) -> Path | None:
    if settings.job == NO_JOB:
        return None
    script = SOURCE_DIR / settings.job
    if not script.is_file():
        raise UsageError(
            f"hyperparameter entry.job={settings.job}: no such Ray job script in the source directory {SOURCE_DIR}"
        )
    return script


def trains(settings: EntrySettings) -> bool:
    """The job is the training script, which takes our topology's defaults."""
    return settings.job == EntrySettings.job


def job_flags(topology: Topology, settings: EntrySettings, flags: list[str], environment_s: float = 0.0) -> list[str]:
    """The job's flags: for the training job, defaults from the topology first and the hyperparameters
    after them (last wins); another job script gets the hyperparameters alone. ``environment_s``: what making the
    job's environment took this host, for the ledger."""
    if not trains(settings):
        return flags
    check_checkpoints_kept(flags, topology.base)
    use_gpu = topology.num_gpus > 0
    training_hosts = len(topology.hosts) - (0 if settings.head_trains else 1)
    workers = training_hosts * (topology.num_gpus if use_gpu else 1)
    defaults = [
        "--cluster.address=auto",
        f"--cluster.num_workers={workers}",
        f"--cluster.use_gpu={'true' if use_gpu else 'false'}",
        f"--cluster.model_dir={topology.model_dir}",
        f"--cluster.checkpoint_dir={topology.checkpoint_dir / CHECKPOINT_ROOT}",
        # SageMaker uploads whatever appears under /opt/ml/checkpoints: checkpoints are assembled beside it.
        f"--cluster.staging_dir={topology.base / 'raycluster-staging'}",
        f"--output_dir={SCRATCH / 'train'}",
        f"--cluster.curves_port={CURVES_PORT}",
        # The ledger counts the job's start from the container's, SageMaker's driver and its install included.
        f"--cluster.started_at={process_started(1):.3f}",
        f"--cluster.environment_s={environment_s:.2f}",
    ]
    if not use_gpu:
        defaults.append("--policy.device=cpu")
    if "dataset" in topology.channels:
        defaults.append(f"--dataset.root={topology.channels['dataset']}")
    return defaults + flags


def probe_flags(flags: list[str]) -> list[str]:
    return [flag for flag in flags if flag.startswith(PROBE_FLAGS)]


def check_checkpoints_kept(flags: list[str], base: Path) -> None:
    """The user's own flags, before the defaults are put in: an empty ``--cluster.checkpoint_dir=`` there
    would override the default root with none, a spot job that keeps nothing. (An empty model_dir is let
    through: the final checkpoint still holds the model, and ``--checkpoint_format=dcp`` needs it empty.)"""
    given, _ = split_group(flags, GROUP)
    if given.get("checkpoint_dir") == "":
        root = base / "checkpoints"
        raise UsageError(
            f"--cluster.checkpoint_dir= is empty: on SageMaker the job would keep no checkpoint, and a spot "
            f"reclaim or a restart would start over; give a path under {root} or an s3://bucket/prefix"
        )


def check_kept_on_sagemaker(cluster: ClusterConfig, base: Path) -> None:
    """Only ``/opt/ml/checkpoints`` (synced to the checkpoint S3 URI as the job runs) and ``/opt/ml/model``
    (tarred at the end) outlive a SageMaker instance: anything kept elsewhere would vanish with it."""
    if cluster.keep_checkpoints == 1:
        raise UsageError(
            "--cluster.keep_checkpoints=1 on SageMaker: the older checkpoint would be deleted while the newer one "
            "may still be uploading to S3, and a spot reclaim then would leave none complete there; keep 2 or more "
            "(0 keeps all)"
        )
    for name, root, value in (
        ("checkpoint_dir", base / "checkpoints", cluster.checkpoint_dir),
        ("model_dir", base / "model", cluster.model_dir),
    ):
        # Empty: not given (the launcher sees the user's flags alone) or an empty model_dir; an emptied
        # checkpoint_dir is refused by check_checkpoints_kept, which sees the flags as given.
        if not value or (name == "checkpoint_dir" and value.startswith("s3://")):
            continue
        path = Path(os.path.normpath(value))
        if not (path.is_absolute() and (path == root or root in path.parents)):
            also = " or an s3://bucket/prefix" if name == "checkpoint_dir" else ""
            raise UsageError(
                f"--cluster.{name}={value}: on SageMaker only {root} outlives the instance; "
                f"give a path under {root}{also}"
            )
