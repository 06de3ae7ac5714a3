"""The SageMaker training job itself, built with the SageMaker Python SDK v3 (``ModelTrainer``).

The SDK stages two channels: ``code`` (our source directory) and ``sm_drivers`` (its own container
driver, ``sm_train.sh`` + ``scripts/``, which runs our command). ``stage`` has the SDK do that on this
machine without any AWS call: the dry run prints what it made, and ``raycluster sim`` runs it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from raycluster.auth import new_token
from raycluster.errors import UsageError
from raycluster.launch.aws_errors import AwsError, one_line
from raycluster.launch.channels import data_channels
from raycluster.launch.dashboard import keep_token
from raycluster.launch.requirements import constraints, requirements
from raycluster.launch.secret_ids import check_secrets_exist
from raycluster.launch.session import remove_uploads, staging_session
from raycluster.launch.spec import LaunchSpec
from raycluster.launch.wheelhouse import CHANNEL as WHEELHOUSE_CHANNEL
from raycluster.launch.wheelhouse import DEFAULT_DIR, host_requirement_lines, resolve_wheelhouse
from raycluster.layout import AUTH_TOKEN_FILE, SHIPPED_WHEELS, SOURCE_DIR

log = logging.getLogger(__name__)

# Command mode: SageMaker's v3 driver execs this, so SIGTERM reaches the entry point.
COMMAND = "exec python -u -m entry"
VALIDATE_ROLE = "SAGEMAKER_VALIDATE_ROLE"


def stage_source(spec: LaunchSpec, into: Path) -> Path:
    """The code channel: entry/, raycluster/, jobs/ (+ the user's scripts), wheels/, requirements, the token."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("entry", "raycluster", "jobs"):
        shutil.copytree(SOURCE_DIR / package, into / package, ignore=ignore)
    for given, folder in [*((path, "jobs") for path in spec.include), *((w, SHIPPED_WHEELS) for w in spec.wheels)]:
        (into / folder).mkdir(exist_ok=True)
        shutil.copy2(given, into / folder / Path(given).name)
    (into / "constraints.txt").write_text("\n".join(constraints(spec.framework_version)) + "\n")
    # With --wheelhouse, the hosts' pip looks in the wheelhouse channel and at no index.
    hosts_look = host_requirement_lines() if spec.wheelhouse is not None else []
    (into / "requirements.txt").write_text("\n".join(hosts_look + job_requirements(spec)) + "\n")
    # One Ray auth token for every host of this job: it travels with the code (readable by whoever can
    # read the job's code in S3, and by the job's role), never in hyperparameters or environment, which
    # DescribeTrainingJob shows.
    new_token(into / AUTH_TOKEN_FILE)
    return into


def image_uri(spec: LaunchSpec, region: str) -> str:
    if spec.image_uri:
        return spec.image_uri
    from sagemaker.core import image_uris

    return image_uris.retrieve(
        framework="pytorch",
        region=region,
        version=spec.framework_version,
        py_version=spec.py_version,
        instance_type=spec.image_instance_type,
        image_scope="training",
    )


def compute(spec: LaunchSpec):
    from sagemaker.core.shapes import InstanceGroup
    from sagemaker.core.training.configs import Compute

    if not spec.instance_groups:
        kind = {"instance_type": spec.instance_type, "instance_count": spec.instance_count}
    else:  # a heterogeneous cluster: SageMaker numbers the hosts algo-1 ... across the groups
        groups = [InstanceGroup(instance_group_name=n, instance_type=t, instance_count=c) for n, t, c in spec.groups()]
        kind = {"instance_groups": groups}
    warm_pool = {"keep_alive_period_in_seconds": spec.keep_alive} if spec.keep_alive else {}
    return Compute(**kind, **warm_pool, enable_managed_spot_training=spec.spot or None)


def build_trainer(spec: LaunchSpec, source: Path, session):
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Networking,
        OutputDataConfig,
        RemoteDebugConfig,
        SourceCode,
        StoppingCondition,
        Tag,
    )
    from sagemaker.train import ModelTrainer

    trainer = ModelTrainer(
        sagemaker_session=session,
        role=spec.role,
        base_job_name=spec.base_job_name,
        training_image=image_uri(spec, session.boto_session.region_name),
        # No requirements for the SDK's driver to install: the entry point restores the job's environment, or
        # installs it once and keeps it (raycluster/environment).
        source_code=SourceCode(source_dir=str(source), command=COMMAND),
        compute=compute(spec),
        stopping_condition=StoppingCondition(
            max_runtime_in_seconds=spec.max_run, max_wait_time_in_seconds=spec.max_wait if spec.spot else None
        ),
        checkpoint_config=(
            CheckpointConfig(s3_uri=spec.checkpoint_s3, local_path="/opt/ml/checkpoints")
            if spec.checkpoint_s3
            else None
        ),
        output_data_config=OutputDataConfig(s3_output_path=spec.output_s3) if spec.output_s3 else None,
        networking=(
            Networking(subnets=list(spec.subnets), security_group_ids=list(spec.security_groups))
            if spec.subnets or spec.security_groups
            else None
        ),
        hyperparameters=spec.hyperparameters,
        environment=spec.environment(session.boto_session.region_name) or None,
        tags=[Tag(key=k, value=v) for k, v in spec.tags.items()] or None,
    )
    # Remote debugging lets `aws ssm start-session` reach algo-1, which is how the dashboard is reached.
    return trainer.with_remote_debug_config(RemoteDebugConfig(enable_remote_debug=not spec.no_remote_debugging))


@dataclass(frozen=True)
class Staged:
    """What SageMaker would get: the CreateTrainingJob request and the two channels the SDK makes."""

    request: dict
    code: Path
    drivers: Path

    def code_files(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.code))
            for p in self.code.rglob("*")
            if p.is_file() and str(p.relative_to(self.code)) != AUTH_TOKEN_FILE
        )


def stage(spec: LaunchSpec, into: Path) -> Staged:
    """The SDK's own request and channels, made here with no network and no credentials."""
    spec.check()
    source = stage_source(spec, into / "code")
    # The SDK's own switch for its IAM check of the role; the session refuses any AWS call anyway.
    saved = os.environ.get(VALIDATE_ROLE)
    os.environ[VALIDATE_ROLE] = "false"
    try:
        trainer = build_trainer(spec, source, staging_session(spec, offline=True))
    finally:
        if saved is None:
            os.environ.pop(VALIDATE_ROLE)
        else:
            os.environ[VALIDATE_ROLE] = saved
    # A dry run resolves nothing (it reaches no index): the channel is there, empty, as the request names it.
    wheelhouse = None if spec.wheelhouse is None else into / WHEELHOUSE_CHANNEL
    if wheelhouse is not None:
        wheelhouse.mkdir()
    request = trainer._create_training_job_args(input_data_config=data_channels(spec, wheelhouse), boto3=True)
    drivers = into / "sm_drivers"
    shutil.copytree(trainer._temp_code_dir.name, drivers)
    return Staged(json.loads(json.dumps(request, default=str)), source, drivers)


def job_requirements(spec: LaunchSpec) -> list[str]:
    """The job's requirements, its constraints beside them (``constraints.txt``)."""
    env_type = spec.hyperparameters.get("env__type")  # the job's own flags, or what a ModelTrainer would send
    return ["-c constraints.txt", *requirements(env_type)]


def collect_wheels(spec: LaunchSpec, source: Path, tmp: Path) -> Path:
    """``--wheelhouse``: the job's requirements resolved and downloaded here (where this machine's pip looks,
    not the hosts' channel); the channel's directory, holding exactly the resolved wheels."""
    shutil.copy2(source / "constraints.txt", tmp / "constraints.txt")  # the hosts' own, beside what names them
    wanted = tmp / "requirements.txt"
    wanted.write_text("\n".join(job_requirements(spec)) + "\n")
    python = f"{spec.py_version[2]}.{spec.py_version[3:]}"  # py312: 3.12
    names = resolve_wheelhouse(wanted, Path(spec.wheelhouse or DEFAULT_DIR), tmp / WHEELHOUSE_CHANNEL, python)
    log.info("the wheelhouse channel holds %d wheels resolved for the hosts", len(names))
    return tmp / WHEELHOUSE_CHANNEL


def launch(spec: LaunchSpec, wait: bool = False) -> dict:
    """Submit the job and return the exact CreateTrainingJob request, as botocore sent it."""
    spec.check()
    captured: dict = {}
    with tempfile.TemporaryDirectory(prefix="raycluster-source-") as tmp:
        source = stage_source(spec, Path(tmp) / "source")
        wheelhouse = None if spec.wheelhouse is None else collect_wheels(spec, source, Path(tmp))
        token = (source / AUTH_TOKEN_FILE).read_text()
        created, session = [], None

        def job_created(http_response, **_):
            if http_response.status_code < 300:  # botocore runs after-call before it raises a refusal
                created.append(True)
                keep_token(captured["TrainingJobName"], token)  # for `raycluster dashboard`: now, not at its end

        try:  # every AWS call, the SDK's role validation in ModelTrainer's constructor included
            session = staging_session(spec, offline=False)
            check_secrets_exist(spec.secrets, session.boto_session.region_name, session.boto_session)
            trainer = build_trainer(spec, source, session)
            events = session.boto_session.events
            events.register(
                "provide-client-params.sagemaker.CreateTrainingJob", lambda params, **_: captured.update(params)
            )
            events.register("after-call.sagemaker.CreateTrainingJob", job_created)
            trainer.train(input_data_config=data_channels(spec, wheelhouse), wait=wait, logs=wait)
        except Exception as exc:
            if not created and session is not None:
                remove_uploads(session)
            if isinstance(exc, UsageError):  # ours (a secret's check): already one line naming the flag
                raise
            raise AwsError(f"launch failed: {one_line(exc)}") from None
    log.info("submitted training job %s", captured.get("TrainingJobName"))
    return json.loads(json.dumps(captured, default=str))
