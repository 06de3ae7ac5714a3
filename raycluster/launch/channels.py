"""The job's data channels: each an S3 prefix that SageMaker mounts on every host (FastFile: read as it is
opened, nothing copied before the job starts) under /opt/ml/input/data/<name>; and the wheelhouse, a local
directory the SDK uploads, copied onto every host before the container starts (File: pip reads every wheel)."""

from __future__ import annotations

from pathlib import Path

from raycluster.launch.spec import LaunchSpec
from raycluster.launch.wheelhouse import CHANNEL as WHEELHOUSE_CHANNEL
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


def data_channels(spec: LaunchSpec, wheelhouse: Path | None = None) -> list | None:
    """``--dataset-s3`` (a LeRobot dataset), ``--hub-cache-s3`` (a Hugging Face Hub cache) and the wheels resolved
    for ``--wheelhouse``, from the local directory ``wheelhouse``."""
    from sagemaker.core.training.configs import InputData

    given = ((DATASET_CHANNEL, spec.dataset_s3), (HUB_CHANNEL, spec.hub_cache_s3))
    channels = [fast_file(name, uri) for name, uri in given if uri]
    if wheelhouse is not None:
        channels.append(InputData(channel_name=WHEELHOUSE_CHANNEL, data_source=str(wheelhouse)))
    return channels or None
