"""Where published checkpoints live, behind one small interface: a local directory or an S3 prefix.

A published checkpoint is a directory (``<name>/...``) whose manifest was written after every file.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Protocol

from raycluster.checkpoints.manifest import MANIFEST, SAGEMAKER_UPLOADING, OutsideCheckpoint, problems, within

log = logging.getLogger(__name__)
QUARANTINE = "quarantine"


def by_step(names) -> list[str]:
    """Checkpoint names (LeRobot's zero-padded steps) in step order. Never as text: LeRobot pads to
    ``max(6, len(str(steps)))``, so a run relaunched with more steps writes ``0505000`` after ``500000``."""
    return sorted((n for n in names if n.isascii() and n.isdigit()), key=int)  # not '²', which int() refuses


class CheckpointStore(Protocol):
    checks_content: bool
    """``problems`` reads every file against its checksum (else: names and sizes only)."""

    def names(self) -> list[str]:
        """Every checkpoint directory present, complete or not, oldest step first."""

    def publish(self, staged: Path, name: str) -> None:
        """Make ``staged`` (manifest included) the checkpoint ``name``; complete or absent, never half."""

    def problems(self, name: str) -> str | None:
        """Why ``name`` is not complete and intact, or None."""

    def quarantine(self, name: str, reason: str) -> None:
        """Move ``name`` aside (never delete it) so it is not resumed from."""

    def delete(self, name: str) -> None: ...

    def local_copy(self, name: str) -> Path:
        """A local directory holding ``name``'s files (the checkpoint itself for a local store)."""


class LocalStore:
    checks_content = True

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for leftover in list(self.root.glob(".incoming-*")) + list(self.root.glob(".replaced-*")):
            shutil.rmtree(leftover)  # staging of a publish that was cut short: never a checkpoint

    def names(self) -> list[str]:
        return by_step(p.name for p in self.root.iterdir() if p.is_dir())

    def publish(self, staged: Path, name: str) -> None:
        # A rename is atomic: staged on the root's filesystem (the keeper's staging dir; on SageMaker outside
        # the synced /opt/ml/checkpoints), the checkpoint appears whole, and nothing partial is ever seen.
        try:
            self._swap_in(staged, name)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        # Staged on another filesystem: copied next to the root first, under a name no reader takes for a
        # checkpoint (SageMaker's sync does see it: give the keeper a staging dir on the root's filesystem).
        incoming = self.root / f".incoming-{name}-{time.time_ns()}"
        try:
            shutil.copytree(staged, incoming)
        except (OSError, shutil.Error) as exc:
            shutil.rmtree(incoming, ignore_errors=True)  # a full disk keeps nothing half-copied
            shutil.rmtree(staged, ignore_errors=True)
            # shutil.Error lists (source, target, why) for every file; the first why says it all.
            why = exc.args[0][0][2] if isinstance(exc, shutil.Error) else str(exc)
            raise OSError(f"cannot publish checkpoint {name} into {self.root}: {why}") from None
        shutil.rmtree(staged)
        self._swap_in(incoming, name)

    def _swap_in(self, source: Path, name: str) -> None:
        final = self.root / name
        if final.exists():
            # The old copy is renamed away first, so `final` is always whole or absent; beside the source,
            # which (staged outside a synced root) keeps its deletion out of SageMaker's sight too.
            old = source.with_name(f".replaced-{name}-{time.time_ns()}")
            final.rename(old)
            source.rename(final)
            shutil.rmtree(old)
        else:
            source.rename(final)

    def problems(self, name: str) -> str | None:
        path = self.root / name
        manifest = path / MANIFEST
        return problems(path, json.loads(manifest.read_text()) if manifest.is_file() else None)

    def quarantine(self, name: str, reason: str) -> None:
        aside = self.root.parent / QUARANTINE / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        (self.root / name).rename(aside)
        log.warning("checkpoint %s is incomplete (%s): moved aside to %s", self.root / name, reason, aside)

    def delete(self, name: str) -> None:
        shutil.rmtree(self.root / name)

    def local_copy(self, name: str) -> Path:
        return self.root / name

    def __str__(self) -> str:
        return str(self.root)


class S3Store:
    """``s3://bucket/prefix``: files first, the manifest object last, so a listing never shows a
    checkpoint with a manifest whose files are missing."""

    checks_content = False  # a listing gives sizes; the bytes are checked when a checkpoint is read

    def __init__(self, url: str, client=None):
        import boto3

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"{url!r} is not s3://bucket/prefix")
        self.url, self.bucket, self.prefix = url, bucket, prefix.strip("/")
        self.s3 = client or boto3.client("s3")
        self._cache: Path | None = None  # made on the first download: most stores (the driver's) never need it
        # The keeper serves chunks from several threads: one download and one check per checkpoint, ever.
        self._downloads = threading.Lock()
        self._verified: dict[str, Path] = {}

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def _objects(self, prefix: str) -> dict[str, int]:
        objects = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            objects.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        return objects

    def names(self) -> list[str]:
        root = self._key("") + "/" if self.prefix else ""
        names = {key[len(root) :].split("/", 1)[0] for key in self._objects(root)}
        return by_step(names)

    def publish(self, staged: Path, name: str) -> None:
        for path in sorted(staged.rglob("*")):
            if path.is_file() and path.name != MANIFEST:
                self.s3.upload_file(str(path), self.bucket, self._key(name, str(path.relative_to(staged))))
        self.s3.upload_file(str(staged / MANIFEST), self.bucket, self._key(name, MANIFEST))
        shutil.rmtree(staged)

    def _manifest(self, name: str) -> dict | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self._key(name, MANIFEST))["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def problems(self, name: str) -> str | None:
        manifest = self._manifest(name)
        if manifest is None:
            return "no manifest (an upload that never finished)"
        objects = self._objects(self._key(name) + "/")
        for relpath, want in manifest.items():
            try:
                within(Path(name), relpath)
            except OutsideCheckpoint as exc:
                return f"manifest entry {exc}"
            size = objects.get(self._key(name, relpath))
            if size != want["size"]:
                return f"{relpath}: {'missing' if size is None else f'{size} bytes'}, manifest says {want['size']}"
        if any(key.endswith(SAGEMAKER_UPLOADING) for key in objects):
            return "SageMaker upload leftovers"
        return None

    def quarantine(self, name: str, reason: str) -> None:
        source = self._key(name) + "/"
        target = self._key(QUARANTINE, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}") + "/"
        for key in self._objects(source):
            # The managed copy: a single CopyObject stops at 5 GB, a policy's weights may not.
            self.s3.copy({"Bucket": self.bucket, "Key": key}, self.bucket, target + key[len(source) :])
        self.delete(name)
        log.warning(
            "checkpoint s3://%s/%s is incomplete (%s): moved aside to s3://%s/%s",
            self.bucket,
            source,
            reason,
            self.bucket,
            target,
        )

    def delete(self, name: str) -> None:
        keys = list(self._objects(self._key(name) + "/"))
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1000 keys a call
            self.s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]]}
            )

    def local_copy(self, name: str) -> Path:
        """Downloaded once into a cache on the keeper's node, checked against the manifest once."""
        with self._downloads:
            if name in self._verified:
                return self._verified[name]
            self._cache = self._cache or Path(tempfile.mkdtemp(prefix="raycluster-s3-"))
            target = self._cache / name
            shutil.rmtree(target, ignore_errors=True)
            manifest = self._manifest(name) or {}
            # Only what the manifest lists, each inside the checkpoint: a stray key names nothing on this host.
            for relpath in [*manifest, MANIFEST]:
                path = within(target, relpath)
                path.parent.mkdir(parents=True, exist_ok=True)
                self.s3.download_file(self.bucket, self._key(name, relpath), str(path))
            reason = problems(target, manifest)
            if reason is not None:
                raise RuntimeError(
                    f"checkpoint s3://{self.bucket}/{self._key(name)} changed while it was read: {reason}"
                )
            self._verified[name] = target
            return target

    def __str__(self) -> str:
        return self.url


def open_store(root: str) -> CheckpointStore:
    """``s3://bucket/prefix`` or a local directory, holding ``<step:06d>/`` checkpoints."""
    return (
        S3Store(root.rstrip("/") + "/checkpoints")
        if root.startswith("s3://")
        else LocalStore(Path(root) / "checkpoints")
    )
