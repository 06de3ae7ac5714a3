"""How the entry point runs the cluster on SageMaker: the ``entry.*`` settings group, sent as the
hyperparameters ``entry__<field>`` (``raycluster launch --entry.<field>=...``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.sagemaker.stop_budget import MAX_STOP_TIMEOUT_S, SIGKILL_AFTER_S

ENTRY = "entry"
NO_JOB = "none"
POSITIVE = ("join_timeout_s", "head_wait_s", "lost_after_s", "jobs_api_lost_s", "stop_timeout_s")


@dataclass(frozen=True)
class EntrySettings:
    job: str = "jobs/train_lerobot.py"
    """The Ray job script to run on the head, relative to the source directory; ``none`` runs no job
    (with ``keep_alive_s``: a cluster for your own jobs)."""
    keep_alive_s: float = 0.0
    """Interactive mode: after the job (or with no job) the cluster stays up this long, for your own Ray
    jobs and the dashboard; ``jobs/end_cluster.py`` ends it earlier."""
    join_timeout_s: float = 300.0
    """Head: how long every host's Ray node may take to join."""
    head_wait_s: float = 300.0
    """Worker: how long to keep trying to reach the head."""
    lost_after_s: float = 15.0
    """How long a vanished head (seen from a worker) or a dead node (seen from the head) is tolerated."""
    jobs_api_lost_s: float = 30.0
    """Head: how long the Jobs API (the dashboard on the head) may go without answering before the job is
    stopped as one that can no longer be followed (a dashboard that hangs keeps its node up)."""
    stop_timeout_s: float = 45.0
    """On SIGTERM: how long the job gets to save its current step and stop before its nodes are stopped
    regardless (SageMaker sends SIGKILL 120 s after SIGTERM; at most 60)."""
    preflight: bool = False
    """Run jobs/nccl_probe.py (all-reduce across every worker, EFA or socket fallback) before the job."""
    head_trains: bool = True
    """False: the head's node offers no CPUs/GPUs to training, so every training worker (rank 0 too) runs
    on the other hosts; the head only coordinates (the driver and the checkpoint keeper need none)."""
    head_group: str | None = None
    """Instance group whose first host is the head (heterogeneous clusters); read by the topology."""
    insecure: bool = False
    """True: start even without a Ray auth token in the code (the dashboard and Jobs API then answer
    anyone who reaches the job's network). Off by default: no token, no cluster."""

    def check(self) -> None:
        """Ranges, in one place: a setting out of range stops the job at once, naming the hyperparameter."""
        for name in (*POSITIVE, "keep_alive_s"):
            value = getattr(self, name)
            if value is None or not math.isfinite(value) or value < 0 or (value == 0 and name in POSITIVE):
                bound = "> 0" if name in POSITIVE else ">= 0"
                raise UsageError(f"hyperparameter entry__{name}={value} must be a finite number {bound} (seconds)")
        if self.stop_timeout_s > MAX_STOP_TIMEOUT_S:
            raise UsageError(
                f"hyperparameter entry__stop_timeout_s={self.stop_timeout_s:g} must be at most "
                f"{MAX_STOP_TIMEOUT_S:g}: SageMaker kills every host {SIGKILL_AFTER_S:g}s after SIGTERM, "
                "and the job's report and the nodes' own stop need the rest"
            )
        job = self.job
        if not job or (
            job != NO_JOB and (Path(job).is_absolute() or ".." in Path(job).parts or not job.endswith(".py"))
        ):
            raise UsageError(
                f"hyperparameter entry__job={job!r} must be a .py script inside the source directory "
                "(e.g. jobs/train_lerobot.py), or none"
            )
