"""What a launch asks for, checked before anything is uploaded or submitted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raycluster.cluster_config import S3_URI, split_cluster_args
from raycluster.environment.host import CACHE_ENV
from raycluster.errors import UsageError
from raycluster.launch.requirements import DLC_PYTHON, torch_release
from raycluster.layout import DEFAULT_BASE
from raycluster.sagemaker.hyperparameters import split_hyperparameters, to_hyperparameters
from raycluster.sagemaker.job_env import job_environment
from raycluster.sagemaker.job_plan import check_checkpoints_kept, check_kept_on_sagemaker

INSTANCE_TYPE = re.compile(r"^ml\.[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z0-9]+\Z")
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+\Z")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d\Z")
GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}\Z")
GPU_FAMILIES = ("ml.p", "ml.g")
JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}\Z")
SECURITY_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}\Z")
# `\Z`, not `$`: `$` also matches before a final newline, and a name ending in one would pass.
MAX_RUNTIME_S = 28 * 24 * 3600
"""SageMaker's limit on MaxRuntimeInSeconds and MaxWaitTimeInSeconds."""
ENV_CACHE_DIR = "raycluster-environments"
"""Under --output-s3, where the environment archives go by default."""
MAX_KEEP_ALIVE_S = 3600
"""SageMaker's limit on KeepAlivePeriodInSeconds (a warm pool's wait for the next job)."""


def option(flag: str | None = None, metavar: str | None = None, const: str | None = None, **kwargs):
    """A field that ``raycluster launch`` offers as ``flag`` (``--field-name`` unless given; ``""``: none);
    ``const``: the value of the flag given without one."""
    given = (("flag", flag), ("metavar", metavar), ("const", const))
    metadata = {name: value for name, value in given if value is not None}
    return field(metadata=metadata, **kwargs)


@dataclass(frozen=True)
class LaunchSpec:
    """What ``raycluster launch`` submits; each field is one of its options, help and default declared here."""

    role: str
    """IAM role ARN the job runs as."""
    instance_type: str = ""
    """SageMaker instance type of every host (e.g. ml.p5.48xlarge); or --instance-group."""
    instance_count: int = 1
    """Hosts (algo-1 ... algo-N); algo-1 runs the Ray head."""
    instance_groups: dict[str, str] = option("--instance-group", "NAME=TYPE:COUNT", default_factory=dict)
    """A heterogeneous cluster instead of --instance-type/--instance-count, one group each (repeatable), e.g.
    train=ml.p5.48xlarge:2 and eval=ml.c7i.8xlarge:1. Every host of group NAME offers Ray the resource
    group:NAME (one per CPU), which --cluster.eval_resources='{"group:eval": 1}' asks for; the head runs on the
    first group's first host (--entry.head_group=NAME for another)."""
    region: str | None = None
    """AWS region; the SDK's default (AWS_REGION, ~/.aws/config) when not given."""
    framework_version: str = "2.8"
    """PyTorch DLC version (its torch is kept)."""
    py_version: str = DLC_PYTHON
    """The DLC's Python; LeRobot needs 3.12."""
    image_uri: str | None = None
    """A training image instead of the DLC lookup."""
    spot: bool = False
    """Managed spot training (needs --max-wait, --checkpoint-s3)."""
    no_remote_debugging: bool = False
    """No SSM session onto the job's hosts (on by default: it is how the Ray dashboard is reached, and it gives
    whoever may start SSM sessions on the job a root shell on every host)."""
    max_run: int = 24 * 3600
    """Seconds."""
    max_wait: int | None = None
    """Seconds, spot only, >= --max-run."""
    keep_alive: int = option("--keep-alive", "SECONDS", default=0)
    """Keep the hosts in a SageMaker managed warm pool this long after the job ends (1-3600; billed while they
    wait): the next job asking for the same instances starts on them, with no provisioning."""
    checkpoint_s3: str | None = None
    """s3:// URI synced with /opt/ml/checkpoints."""
    output_s3: str | None = None
    """s3:// URI for model.tar.gz and output."""
    dataset_s3: str | None = None
    """s3:// URI of a LeRobot dataset: the `dataset` channel, FastFile mode."""
    hub_cache_s3: str | None = None
    """s3:// URI of a Hugging Face Hub cache (`hf download --cache-dir`): the `hub` channel, FastFile mode; every
    host reads the Hub's files there with HF_HUB_OFFLINE=1 (a --policy.path=<repo id> included)."""
    env_cache_s3: str | None = None
    """s3:// URI where the job's environment (what it installs over the image) is kept as one archive per key of
    what decides it; every later start with that key restores it with no installer (default: beside
    --output-s3, shared by the jobs writing there; none without either)."""
    env: dict[str, str] = option("--env", "NAME=VALUE", default_factory=dict)
    """For every rank on every host, repeatable (DescribeTrainingJob shows it: no secrets)."""
    secrets: dict[str, str] = option("--secret", "NAME=SECRET", default_factory=dict)
    """Every rank sees NAME set to the value of SECRET (an AWS Secrets Manager name or ARN), read on each host
    with the job's role; the value is sent nowhere; repeatable."""
    base_job_name: str = option("--job-name", default="raycluster")
    """Base job name."""
    tags: dict[str, str] = option("--tag", default_factory=dict)
    """KEY=VALUE, repeatable."""
    subnets: tuple[str, ...] = option("--subnet", default=())
    """Repeatable."""
    security_groups: tuple[str, ...] = option("--security-group", default=())
    """Repeatable."""
    include: tuple[str, ...] = ()
    """Your own Ray job script, staged into jobs/ (repeatable)."""
    wheels: tuple[str, ...] = option("--wheel", default=())
    """A wheel installed on every host over the image's packages, without its dependencies (e.g. LeRobot
    main, which no release has yet); repeatable."""
    wheelhouse: str | None = option("--wheelhouse", "DIR", const="", default=None)
    """The hosts install the job's packages from wheels resolved here, with no package index (a VPC with no route to
    PyPI): pip resolves them for the hosts (manylinux x86_64, the image's Python) into DIR (default
    ~/.cache/raycluster/wheelhouse, kept: the next launch downloads only what changed), and the launch uploads
    them as the `wheelhouse` channel. torch and its CUDA libraries stay the image's."""
    flags: tuple[str, ...] = option("", default=())
    """``--cluster.*``, ``--entry.*`` and LeRobot flags; they travel as hyperparameters (``group__field``)."""
    raw_hyperparameters: dict[str, Any] = option("", default_factory=dict)
    """Sent as given, unchecked, after the flags: what a user's own ``ModelTrainer`` would send
    (``raycluster sim --hyperparameters``)."""

    def check(self) -> None:
        self._check_names()
        self._check_time()
        self._check_network()
        self._check_sources()
        self.environment(self.region or "")

    def groups(self) -> list[tuple[str, str, int]]:
        """``--instance-group`` as (name, instance type, count), refused unless well formed."""
        groups = []
        for name, text in self.instance_groups.items():
            kind, _, count = text.rpartition(":")
            if not GROUP_NAME.match(name) or "_group_" in name:
                raise UsageError(f"--instance-group {name}={text}: NAME is letters, digits and '-' (up to 64)")
            if not (INSTANCE_TYPE.match(kind) and count.isdigit() and int(count) >= 1):
                raise UsageError(
                    f"--instance-group {name}={text}: expected NAME=TYPE:COUNT, e.g. eval=ml.c7i.8xlarge:1"
                )
            groups.append((name, kind, int(count)))
        return groups

    @property
    def image_instance_type(self) -> str:
        """The type the image is looked up for: one image serves every group, so a GPU group's if there is one."""
        kinds = [kind for _, kind, _ in self.groups()] or [self.instance_type]
        return next((kind for kind in kinds if kind.startswith(GPU_FAMILIES)), kinds[0])

    def _check_names(self) -> None:
        if bool(self.instance_type) == bool(self.instance_groups):
            raise UsageError("give either --instance-type (with --instance-count) or --instance-group, repeated")
        self.groups()
        if self.instance_type and not INSTANCE_TYPE.match(self.instance_type):
            raise UsageError(
                f"--instance-type {self.instance_type!r} is not a SageMaker instance type (e.g. ml.p5.48xlarge)"
            )
        if self.instance_count < 1:
            raise UsageError(f"--instance-count must be >= 1, got {self.instance_count}")
        if not ROLE_ARN.match(self.role):
            raise UsageError(f"--role {self.role!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)")
        if self.region is not None and not REGION.match(self.region):
            raise UsageError(f"--region {self.region!r} is not an AWS region (e.g. us-west-2)")
        if not JOB_NAME.match(self.base_job_name):
            raise UsageError(
                f"--job-name {self.base_job_name!r}: letters, digits and '-' only, starting with a letter "
                "or digit (SageMaker's job-name rule)"
            )
        for key, value in self.tags.items():
            if len(key) > 128 or len(value) > 256 or key.lower().startswith("aws:"):
                raise UsageError(
                    f"--tag {key}={value}: keys up to 128 characters and not starting with 'aws:', "
                    "values up to 256 (AWS's tag rules)"
                )

    def _check_time(self) -> None:
        if not 1 <= self.max_run <= MAX_RUNTIME_S:
            raise UsageError(
                f"--max-run must be 1..{MAX_RUNTIME_S} seconds (28 days, SageMaker's limit), got {self.max_run}"
            )
        if self.max_wait is not None and self.max_wait > MAX_RUNTIME_S:
            raise UsageError(
                f"--max-wait must be at most {MAX_RUNTIME_S} seconds (28 days, SageMaker's limit), got {self.max_wait}"
            )
        if not 0 <= self.keep_alive <= MAX_KEEP_ALIVE_S:
            raise UsageError(
                f"--keep-alive must be 0..{MAX_KEEP_ALIVE_S} seconds (SageMaker's limit for a warm pool), got "
                f"{self.keep_alive}"
            )
        if self.spot:
            if self.max_wait is None or self.max_wait < self.max_run:
                raise UsageError(f"--spot needs --max-wait >= --max-run ({self.max_run}s), got {self.max_wait}")
            if not self.checkpoint_s3:
                raise UsageError("--spot needs --checkpoint-s3: an interrupted spot job resumes from its checkpoints")
        elif self.max_wait is not None:
            raise UsageError("--max-wait applies to spot jobs only; add --spot or drop it")

    def _check_network(self) -> None:
        for flag, values, pattern, example in (
            ("--subnet", self.subnets, SUBNET, "subnet-0123456789abcdef0"),
            ("--security-group", self.security_groups, SECURITY_GROUP, "sg-0123456789abcdef0"),
        ):
            for value in values:
                if not pattern.match(value):
                    raise UsageError(f"{flag} {value!r} is not a {example.split('-')[0]}-… id (e.g. {example})")
        if bool(self.subnets) != bool(self.security_groups):
            raise UsageError("--subnet and --security-group go together: SageMaker's VPC config needs both")

    def _check_sources(self) -> None:
        for name in ("checkpoint_s3", "output_s3", "dataset_s3", "hub_cache_s3", "env_cache_s3"):
            value = getattr(self, name)
            if value and not S3_URI.match(value):
                raise UsageError(f"--{name.replace('_', '-')} {value!r} is not an s3://bucket/prefix URI")
        if not self.image_uri and self.py_version != DLC_PYTHON:
            raise UsageError(
                f"--py-version {self.py_version}: LeRobot needs Python 3.12, so {DLC_PYTHON} "
                "(or --image-uri for your own image)"
            )
        if not self.image_uri:
            torch_release(self.framework_version)
        if self.wheelhouse and Path(self.wheelhouse).exists() and not Path(self.wheelhouse).is_dir():
            raise UsageError(f"--wheelhouse {self.wheelhouse}: not a directory; name one for the job's wheels")
        for wheel in self.wheels:
            if not (wheel.endswith(".whl") and Path(wheel).is_file()):
                raise UsageError(f"--wheel {wheel}: not a wheel file here (a path ending in .whl)")
        # Refused here, before any upload, as the entry point would refuse them on the hosts: what SageMaker's
        # driver cannot carry, and entry.* / cluster.* settings out of range.
        flags = split_hyperparameters(to_hyperparameters(list(self.flags)))[1]
        if self.hub_cache_s3 and "--policy.push_to_hub=false" not in (flag.lower() for flag in flags):
            raise UsageError(
                "--hub-cache-s3: the hosts read the Hub offline (HF_HUB_OFFLINE=1), so LeRobot's push to the Hub at "
                "the end would fail after the whole training; add --policy.push_to_hub=false (the model is in "
                "/opt/ml/model, to push from there)"
            )
        cluster, _ = split_cluster_args(flags)
        check_checkpoints_kept(flags, DEFAULT_BASE)
        check_kept_on_sagemaker(cluster, DEFAULT_BASE)

    def environment(self, region: str) -> dict[str, str]:
        """The request's Environment: ``--env`` as given, each ``--secret`` as its id only, where the environment
        archives are kept."""
        cache = self.env_cache_s3 or (f"{self.output_s3.rstrip('/')}/{ENV_CACHE_DIR}" if self.output_s3 else None)
        owned = {CACHE_ENV: cache} if cache else {}
        return job_environment(self.env, self.secrets, bool(self.hub_cache_s3), region, owned)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        return {**to_hyperparameters(list(self.flags)), **self.raw_hyperparameters}
