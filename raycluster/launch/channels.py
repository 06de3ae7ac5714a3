"""The job's data channels: each an S3 prefix that SageMaker mounts on every host (FastFile: read as it is
opened, nothing copied before the job starts) under /opt/ml/input/data/<name>."""

from __future__ import annotations

from raycluster.launch.spec import LaunchSpec
from raycluster.sagemaker.job_env import HUB_CHANNEL

DATASET_CHANNEL = "dataset"


def fast_file(name: str, uri: str):
    from sagemaker.core.training.configs import Channel, DataSource, S3DataSource

    return Channel(
        channel_name=name,
        data_source=DataSource(
            s3_data_source=S3DataSource(
                s3_data_type="S3Prefix", s3_uri=uri, s3_data_distribution_type="FullyReplicated"
            )
        ),
        input_mode="FastFile",
    )


def data_channels(spec: LaunchSpec) -> list | None:
    """``--dataset-s3`` (a LeRobot dataset) and ``--hub-cache-s3`` (a Hugging Face Hub cache)."""
    given = ((DATASET_CHANNEL, spec.dataset_s3), (HUB_CHANNEL, spec.hub_cache_s3))
    return [fast_file(name, uri) for name, uri in given if uri] or None
