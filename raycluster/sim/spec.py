"""What a simulated job is: its hosts, its work directory, the request the SageMaker SDK made, and its channels.
The job's runner (``job.py``) and the layout of each host's ``/opt/ml`` (``opt_ml.py``) both read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raycluster.launch.trainer import Staged


@dataclass(frozen=True)
class SimSpec:
    hosts: int
    workdir: Path
    staged: Staged
    """The CreateTrainingJob request and the ``code`` and ``sm_drivers`` channels the SageMaker SDK made."""
    channels: dict[str, Path]
    """Data channels, by name, from local directories (the request's S3 channels cannot be fetched here)."""
    checkpoints: Path | None = None
    """Copied into every host's /opt/ml/checkpoints first, as SageMaker restores them for a restarted job."""
    aws_endpoint: str | None = None
    """An AWS endpoint on this machine's loopback (a moto server) that the hosts reach, with the caller's
    AWS_* credentials standing for the job's role; without it the hosts have neither."""
