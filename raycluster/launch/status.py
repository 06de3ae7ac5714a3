"""A training job's state, its failure reason, and where its checkpoints and model are."""

from __future__ import annotations


def describe(job_name: str, region: str | None = None) -> dict:
    import boto3

    job = boto3.client("sagemaker", region_name=region).describe_training_job(TrainingJobName=job_name)
    return {
        "job": job_name,
        "status": job["TrainingJobStatus"],
        "secondary_status": job.get("SecondaryStatus"),
        "failure_reason": job.get("FailureReason"),
        "instances": f"{job['ResourceConfig'].get('InstanceCount')} x {job['ResourceConfig'].get('InstanceType')}",
        "spot": job.get("EnableManagedSpotTraining", False),
        "checkpoints": (job.get("CheckpointConfig") or {}).get("S3Uri"),
        "model": (job.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        "dashboard": f"raycluster dashboard {job_name}" + (f" --region {region}" if region else ""),
    }
