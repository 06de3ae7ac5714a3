"""A checkpoint root as the store that holds it: ``s3://bucket/prefix`` is an S3 prefix, anything else a local
directory. Apart from both stores, so that neither imports the other."""

from __future__ import annotations

from pathlib import Path

from raycluster.checkpoints.s3_store import S3Store
from raycluster.checkpoints.store import CheckpointStore, LocalStore


def open_store(root: str) -> CheckpointStore:
    """``s3://bucket/prefix`` or a local directory, holding ``<step:06d>/`` checkpoints."""
    return (
        S3Store(root.rstrip("/") + "/checkpoints")
        if root.startswith("s3://")
        else LocalStore(Path(root) / "checkpoints")
    )
