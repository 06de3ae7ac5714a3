"""Publishing the curves' store beside the checkpoints, whole or not at all: a consistent SQLite snapshot
is made aside and then renamed into place (a local root, which SageMaker syncs as files change) or put as
one object (S3), so a reader never downloads a torn file."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

CURVES = "curves"
"""The folder under a checkpoint root (beside its ``checkpoints/``) that holds the published store."""
PROJECT = "raycluster"
"""The trackio project every run is recorded in (one SQLite file, ``raycluster.db``); each run is a trackio run."""


def snapshot(db: Path, into: Path) -> Path:
    """A consistent copy of a live SQLite database (SQLite's own online backup), written to ``into``."""
    target = into / db.name
    source, copy = sqlite3.connect(db), sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return target


def publish(db: Path, root: str, staging: Path) -> str:
    """``db``'s snapshot as ``<root>/curves/<db name>``; returns where it went."""
    staging.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=staging) as tmp:
        copy = snapshot(db, Path(tmp))
        if root.startswith("s3://"):
            import boto3

            bucket, _, prefix = root.removeprefix("s3://").partition("/")
            key = "/".join(p for p in (prefix.strip("/"), CURVES, db.name) if p)
            boto3.client("s3").upload_file(str(copy), bucket, key)
            return f"s3://{bucket}/{key}"
        target = Path(root) / CURVES / db.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(copy, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # st_dev can agree across a bind mount and the rename still fail
                raise
            # Not on the root's filesystem: finish the copy under a hidden name beside the target first.
            hidden = target.with_name(f".{db.name}.partial")
            shutil.copyfile(copy, hidden)
            os.replace(hidden, target)
        return str(target)


def fetch(root: str, into: Path) -> list[Path]:
    """The published stores under ``<root>/curves/`` (local or S3), copied into ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    if not root.startswith("s3://"):
        found = sorted((Path(root) / CURVES).glob("*.db"))
        return [Path(shutil.copyfile(path, into / path.name)) for path in found]
    import boto3

    s3 = boto3.client("s3")
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="/".join(p for p in (prefix.strip("/"), CURVES) if p) + "/")
    fetched = []
    for item in listed.get("Contents", []):
        if item["Key"].endswith(".db"):
            target = into / Path(item["Key"]).name
            partial = target.with_name(f".{target.name}.partial")
            s3.download_file(bucket, item["Key"], str(partial))
            os.replace(partial, target)
            fetched.append(target)
    return fetched
