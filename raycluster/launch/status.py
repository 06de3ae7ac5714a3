"""A training job's state, its failure reason, where its checkpoints and model are, and where its time went:
SageMaker's own phases, and the job's ledger (``raycluster/ledger.py``), read from beside its checkpoints in S3."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

from raycluster.ledger import LEDGER_NAME, ledger_of
from raycluster.sagemaker.job_plan import CHECKPOINT_ROOT


def describe(job_name: str, region: str | None = None) -> dict:
    import boto3

    job = boto3.client("sagemaker", region_name=region).describe_training_job(TrainingJobName=job_name)
    ledger = read_ledger(job, boto3.client("s3", region_name=region))
    return {
        "job": job_name,
        "status": job["TrainingJobStatus"],
        "secondary_status": job.get("SecondaryStatus"),
        "failure_reason": job.get("FailureReason"),
        "instances": f"{job['ResourceConfig'].get('InstanceCount')} x {job['ResourceConfig'].get('InstanceType')}",
        "spot": job.get("EnableManagedSpotTraining", False),
        "checkpoints": (job.get("CheckpointConfig") or {}).get("S3Uri"),
        "model": (job.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        "sagemaker_phases": sagemaker_phases(job),
        "ledger": None if ledger is None else ledger.as_dict(),
        "ledger_line": None if ledger is None else ledger.line(),
        "dashboard": f"raycluster dashboard {job_name}" + (f" --region {region}" if region else ""),
    }


def sagemaker_phases(job: dict) -> list[dict]:
    """SageMaker's own phases (starting, downloading, training, uploading ...) from ``SecondaryStatusTransitions``,
    each with its seconds as far as they are known (the current one has no end yet): what our ledger cannot see,
    since it begins when the container does."""
    return [
        {
            "status": step["Status"],
            "seconds": round((step["EndTime"] - step["StartTime"]).total_seconds(), 1) if step.get("EndTime") else None,
            "message": step.get("StatusMessage"),
        }
        for step in job.get("SecondaryStatusTransitions", [])
    ]


def ledger_key(job: dict) -> tuple[str, str] | None:
    """The ledger's bucket and key: beside the checkpoints under the job's checkpoint S3 URI. None when the job
    keeps no checkpoints in S3, or keeps them outside what SageMaker syncs there."""
    config = job.get("CheckpointConfig") or {}
    if not config.get("S3Uri"):
        return None
    local = PurePosixPath(config.get("LocalPath") or "/opt/ml/checkpoints")
    root = PurePosixPath((job.get("HyperParameters") or {}).get("cluster__checkpoint_dir") or local / CHECKPOINT_ROOT)
    if root != local and local not in root.parents:
        return None
    bucket, _, prefix = config["S3Uri"].removeprefix("s3://").partition("/")
    return bucket, str(PurePosixPath(prefix, root.relative_to(local), LEDGER_NAME))


def read_ledger(job: dict, s3):
    """The job's ledger as its last start kept it; None before any start has kept one."""
    where = ledger_key(job)
    if where is None:
        return None
    try:
        kept = s3.get_object(Bucket=where[0], Key=where[1])["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    try:
        return ledger_of(json.loads(kept))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the job's ledger s3://{where[0]}/{where[1]} is not one raycluster wrote: {exc!r}") from None
