"""Our own settings for a training run, spelled ``--cluster.<name>`` so they never collide with
LeRobot's flags (LeRobot already owns ``--num_workers``). Everything else passes to LeRobot verbatim."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from raycluster.errors import UsageError
from raycluster.evals.settings import EvalSettings
from raycluster.lerobot.lines import LineSettings
from raycluster.settings import parse_group

GROUP = "cluster"
S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?\Z")
# `\Z`, not `$`: `$` also matches before a final newline, which would pass into the bucket's URI.
URI_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
"""A scheme (``s3:``, ``gs:``, ``file:``): what a local path never starts with on the hosts we run on."""

LONGEST_JOB_S = 28 * 24 * 3600.0
"""SageMaker's longest MaxRuntime: a hang timeout beyond it would turn the watchdog off without saying so."""


@dataclass(frozen=True)
class ClusterConfig:
    num_workers: int = 1
    """Ray Train workers; each is one LeRobot process (one GPU, or ``cpus_per_worker`` CPUs)."""
    use_gpu: bool = False
    """One GPU per worker, NCCL between them; false: CPU workers, gloo."""
    address: str = "local"
    """``local`` starts a private Ray cluster for the run and stops it; ``auto`` joins the running one;
    ``HOST:PORT`` joins that GCS."""
    max_failures: int = 0
    """Worker-group restarts Ray Train may make; each restart resumes from the newest checkpoint."""
    hang_timeout_s: float = 600.0
    """No rank finished a training step for this long: the group is hung; every rank's stack is captured and
    the group restarted (a failure, against max_failures). The first step, a checkpoint save, a validation and
    the final publish have allowances of their own (``raycluster/training/watch/watchdog.py``). 0 turns it off."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each CPU worker (ignored with use_gpu)."""
    checkpoint_dir: str = ""
    """Checkpoint root owned by the keeper on the driver's node: a directory or ``s3://bucket/prefix``.
    Every complete checkpoint is published there and a run (or restart) resumes from the newest one."""
    keep_checkpoints: int = 0
    """Keep the newest K complete checkpoints in checkpoint_dir; 0 keeps all."""
    model_dir: str = ""
    """Where the run's model goes, on the driver's node (``/opt/ml/model`` on SageMaker): the
    ``pretrained_model/`` of the best evaluated checkpoint, or else of the last, read back from checkpoint_dir
    after a normal end (so it needs checkpoint_dir). Empty: only in the checkpoints."""
    staging_dir: str = ""
    """Where each host's part store assembles its part before renaming it into place: on the checkpoint root's
    filesystem but outside any directory that is synced as it changes (SageMaker: ``/opt/ml/raycluster-staging``,
    outside ``/opt/ml/checkpoints``); empty: a temporary directory."""
    mixed_precision: str = "auto"
    """``auto`` follows LeRobot's own flags (0.6.x: ``policy.dtype``, else ``policy.use_amp``, which means
    fp16 on CUDA; main: ``--accelerator.mixed_precision``); ``bf16``/``fp16``/``no`` override it, for policies
    such as ACT that have no dtype flag. On LeRobot main it becomes ``--accelerator.mixed_precision`` and is
    refused together with it."""
    sharding: str = "none"
    """LeRobot main only. ``fsdp``: shard the model over every worker (FSDP2); ``hsdp``: shard inside each host
    and replicate across hosts. Fills ``--parallelism.dp_shard``/``dp_replicate`` from where Ray Train placed
    the workers; values you give yourself win. ``none``: LeRobot's own flags decide (DDP by default)."""
    track: str = "trackio"
    """``trackio``: record every logged step's loss, throughput, hardware and the run's events with trackio
    (local files, nothing sent anywhere), draw ``raycluster_curves.png``; ``none``: record nothing."""
    curves_every_s: float = 30.0
    """How often the curves' store is published beside the checkpoints (``<checkpoint_dir>/curves/``)."""
    curves_port: int = 0
    """Serve the live curves (trackio's dashboard; writes need its token, which is never printed) on
    ``127.0.0.1:PORT`` of the driver's node while the run goes; 0: not served. SageMaker jobs: 8266, reached
    with ``raycluster dashboard``."""
    async_eval: bool = False
    """Evaluate every published checkpoint as a Ray task while training goes on, never inside LeRobot's loop
    (whose own evaluations are then off): the loss on the held-out episodes of ``--dataset.eval_split``, and
    rollouts in ``--env.type``'s simulation. Needs ``checkpoint_dir``. See ``raycluster/evals``."""
    eval_resources: str = '{"CPU": 1}'
    """What each evaluation task takes, as JSON the way Ray counts it: ``{"CPU": 2}``, ``{"GPU": 1}``, or the
    resource the SageMaker entry point gives the hosts of an instance group, ``{"group:<name>": 1}``."""
    eval_timeout_s: float = 1800.0
    """An evaluation running longer than this is cancelled and recorded as timed out (never a failed run)."""
    keep_best: str = ""
    """A metric of the evaluations (``eval_loss``: lower is better; ``pc_success``, ``avg_sum_reward``,
    ``avg_max_reward``: higher is better). The best checkpoint is exported to ``model_dir``, never deleted by
    retention, and named in the summary's ``best``; empty: the last checkpoint is the model."""
    started_at: float = 0.0
    """When this start of the job began, in seconds since the epoch: its ledger (``raycluster/ledger.py``) counts
    from there. The SageMaker entry point passes its container's start; 0: the command's own."""
    environment_s: float = 0.0
    """Of the time before the command, the seconds the job's environment took (restored, kept or installed): the
    ledger counts them apart. The SageMaker entry point passes the head host's."""

    def check(self) -> None:
        if self.num_workers < 1:
            raise UsageError(f"--cluster.num_workers must be >= 1, got {self.num_workers}")
        if self.max_failures < -1:
            raise UsageError(f"--cluster.max_failures must be >= 0 (or -1 for unlimited), got {self.max_failures}")
        if not (self.hang_timeout_s == 0 or 10 <= self.hang_timeout_s <= LONGEST_JOB_S):
            raise UsageError(
                f"--cluster.hang_timeout_s must be 0 (off) or a number of seconds from 10 (every rank reports its "
                f"progress every 1-5 s) to {LONGEST_JOB_S:.0f} (28 days, SageMaker's longest job), got "
                f"{self.hang_timeout_s}"
            )
        if not (math.isfinite(self.cpus_per_worker) and self.cpus_per_worker > 0):
            raise UsageError(f"--cluster.cpus_per_worker must be a finite number > 0, got {self.cpus_per_worker}")
        if self.keep_checkpoints < 0:
            raise UsageError(f"--cluster.keep_checkpoints must be >= 0 (0 keeps all), got {self.keep_checkpoints}")
        if not (math.isfinite(self.curves_every_s) and self.curves_every_s > 0):
            raise UsageError(f"--cluster.curves_every_s must be a finite number > 0, got {self.curves_every_s}")
        if not 0 <= self.curves_port <= 65535:
            raise UsageError(f"--cluster.curves_port must be a TCP port (0: not served), got {self.curves_port}")
        if self.track not in ("trackio", "none"):
            raise UsageError(f"--cluster.track must be trackio or none, got {self.track!r}")
        if self.sharding not in ("none", "fsdp", "hsdp"):
            raise UsageError(f"--cluster.sharding must be none, fsdp or hsdp, got {self.sharding!r}")
        if self.mixed_precision not in ("auto", "no", "fp16", "bf16"):
            raise UsageError(f"--cluster.mixed_precision must be auto, no, fp16 or bf16, got {self.mixed_precision!r}")
        check_location("checkpoint_dir", self.checkpoint_dir, s3=True)
        check_location("model_dir", self.model_dir, s3=False)
        if "://" in self.staging_dir:
            raise UsageError(
                f"--cluster.staging_dir={self.staging_dir}: a local directory on the checkpoint root's filesystem"
            )
        if not self.address:
            raise UsageError("--cluster.address must be local, auto or HOST:PORT")
        if not (math.isfinite(self.environment_s) and self.environment_s >= 0):
            raise UsageError(f"--cluster.environment_s must be seconds, 0 or more, got {self.environment_s}")
        if self.started_at and not (math.isfinite(self.started_at) and 0 < self.started_at <= time.time() + 60):
            raise UsageError(
                f"--cluster.started_at must be 0 (the command's start) or a moment already past, in seconds since "
                f"the epoch, got {self.started_at}"
            )
        self.evals().check(self.checkpoint_dir)

    def evals(self) -> EvalSettings:
        """The settings the evaluation side receives, and nothing else of ours."""
        return EvalSettings(self.async_eval, self.eval_resources, self.eval_timeout_s, self.keep_best)

    def check_outputs(self) -> None:
        """Where a run writes, as it will run (SageMaker's entry point puts its defaults in first, so the launcher,
        which sees the user's flags alone, does not ask this)."""
        if self.model_dir and not self.checkpoint_dir:
            raise UsageError(
                f"--cluster.model_dir={self.model_dir} needs --cluster.checkpoint_dir: the model is read back from "
                "the run's last committed checkpoint; give a checkpoint dir (a local path or s3://bucket/prefix)"
            )

    def line(self) -> LineSettings:
        """The settings that plan LeRobot's flags on its installed line."""
        return LineSettings(self.num_workers, self.sharding, self.mixed_precision, self.model_dir)


def check_location(name: str, value: str, s3: bool) -> None:
    """A place to write: a local path, or (where ``s3``) a well-formed ``s3://bucket/prefix``. Anything that
    looks like a URI but is not one of those (``s3:/b``, ``S3://b``, ``gs://b``) is refused, never taken
    as a relative directory."""
    if s3 and value.startswith("s3://"):
        if not S3_URI.match(value):
            raise UsageError(f"--cluster.{name}={value}: not an s3://bucket/prefix URI (bucket: 3-63 of a-z 0-9 . -)")
    elif URI_LIKE.match(value):
        understood = "local paths and s3://bucket/prefix (lower case) are" if s3 else "a local directory is"
        raise UsageError(f"--cluster.{name}={value}: only {understood} understood")


def split_cluster_args(argv: list[str]) -> tuple[ClusterConfig, list[str]]:
    """Separate ``--cluster.*`` flags (ours) from the rest (LeRobot's, untouched and in order)."""
    return parse_group(ClusterConfig, GROUP, argv)
