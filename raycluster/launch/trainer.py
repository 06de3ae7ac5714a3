"""The SageMaker training job itself, built with the SageMaker Python SDK v3 (``ModelTrainer``)."""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import tempfile
from pathlib import Path

from raycluster.launch.dashboard import keep_token
from raycluster.launch.spec import LaunchSpec

log = logging.getLogger(__name__)

SOURCE_DIR = Path(__file__).resolve().parents[2]
# Ray and LeRobot for the container. Never torch: the DLC's torch is built for its CUDA, NCCL and EFA,
# so the constraint pins it to the DLC's own release and pip leaves it alone.
REQUIREMENTS = ["ray[train,default]==2.60.0", "lerobot[training]==0.6.1", "accelerate>=1.10,<2", "boto3>=1.34"]
# Command mode: SageMaker's v3 driver execs this, so SIGTERM reaches the entry point.
COMMAND = "exec python -u -m entry"
AUTH_TOKEN_PATH = ".raycluster/auth_token"


def stage_source(spec: LaunchSpec, into: Path) -> Path:
    """The uploaded source directory: entry/, raycluster/, jobs/ (+ the user's scripts), requirements."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("entry", "raycluster", "jobs"):
        shutil.copytree(SOURCE_DIR / package, into / package, ignore=ignore)
    for extra in spec.include:
        shutil.copy2(extra, into / "jobs" / Path(extra).name)
    (into / "constraints.txt").write_text(f"torch=={spec.framework_version}.*\n")
    (into / "requirements.txt").write_text("-c constraints.txt\n" + "\n".join(REQUIREMENTS) + "\n")
    # One Ray auth token for every host of this job: it travels with the code (readable by whoever can
    # read the job's code in S3, and by the job's role), never in hyperparameters or environment, which
    # DescribeTrainingJob shows.
    token = into / AUTH_TOKEN_PATH
    token.parent.mkdir()
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    return into


def image_uri(spec: LaunchSpec, region: str) -> str:
    if spec.image_uri:
        return spec.image_uri
    from sagemaker.core import image_uris

    return image_uris.retrieve(framework="pytorch", region=region, version=spec.framework_version,
                               py_version=spec.py_version, instance_type=spec.instance_type, image_scope="training")


def build_trainer(spec: LaunchSpec, source: Path):
    import boto3
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.training.configs import (
        CheckpointConfig, Compute, Networking, OutputDataConfig, RemoteDebugConfig, SourceCode, StoppingCondition, Tag,
    )
    from sagemaker.train import ModelTrainer

    boto_session = boto3.Session(region_name=spec.region) if spec.region else boto3.Session()
    region = boto_session.region_name
    # The code goes to the bucket the job already writes to; the SDK's default bucket would need STS.
    code_bucket = next((uri.removeprefix("s3://").split("/")[0] for uri in (spec.output_s3, spec.checkpoint_s3) if uri), None)
    trainer = ModelTrainer(
        sagemaker_session=Session(boto_session=boto_session, default_bucket=code_bucket),
        role=spec.role,
        base_job_name=spec.base_job_name,
        training_image=image_uri(spec, region),
        source_code=SourceCode(source_dir=str(source), requirements="requirements.txt", command=COMMAND),
        compute=Compute(instance_type=spec.instance_type, instance_count=spec.instance_count,
                        enable_managed_spot_training=spec.spot or None),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=spec.max_run,
                                             max_wait_time_in_seconds=spec.max_wait if spec.spot else None),
        checkpoint_config=(CheckpointConfig(s3_uri=spec.checkpoint_s3, local_path="/opt/ml/checkpoints")
                           if spec.checkpoint_s3 else None),
        output_data_config=OutputDataConfig(s3_output_path=spec.output_s3) if spec.output_s3 else None,
        networking=(Networking(subnets=list(spec.subnets), security_group_ids=list(spec.security_groups))
                    if spec.subnets or spec.security_groups else None),
        hyperparameters=spec.hyperparameters,
        tags=[Tag(key=k, value=v) for k, v in spec.tags.items()] or None,
    )
    # Remote debugging lets `aws ssm start-session` reach algo-1, which is how the dashboard is reached.
    return trainer.with_remote_debug_config(RemoteDebugConfig(enable_remote_debug=True))


def dataset_channel(spec: LaunchSpec):
    from sagemaker.core.training.configs import Channel, DataSource, S3DataSource

    return Channel(
        channel_name="dataset",
        data_source=DataSource(s3_data_source=S3DataSource(
            s3_data_type="S3Prefix", s3_uri=spec.dataset_s3, s3_data_distribution_type="FullyReplicated")),
        input_mode="FastFile",
    )


class _Captured(Exception):
    pass


def launch(spec: LaunchSpec, dry_run: bool = False, wait: bool = False) -> dict:
    """Submit the job (or, with ``dry_run``, stop right before submitting) and return the exact
    CreateTrainingJob request, as botocore was about to send it."""
    spec.check()
    captured: dict = {}

    def capture(params, **_):
        captured.update(params)
        if dry_run:
            raise _Captured

    with tempfile.TemporaryDirectory(prefix="raycluster-source-") as tmp:
        source = stage_source(spec, Path(tmp) / "source")
        token = (source / AUTH_TOKEN_PATH).read_text()
        trainer = build_trainer(spec, source)
        trainer.sagemaker_session.boto_session.events.register(
            "provide-client-params.sagemaker.CreateTrainingJob", capture)
        try:
            trainer.train(input_data_config=[dataset_channel(spec)] if spec.dataset_s3 else None,
                          wait=wait, logs=wait)
        except _Captured:
            pass
    if not dry_run:
        keep_token(captured["TrainingJobName"], token)  # for `raycluster dashboard` on this laptop
    log.info("%s training job %s", "would submit" if dry_run else "submitted", captured.get("TrainingJobName"))
    return json.loads(json.dumps(captured, default=str))
