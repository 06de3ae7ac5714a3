"""An S3 prefix as a checkpoint store: files first, the manifest object last."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

from raycluster.checkpoints.manifest import MANIFEST, SAGEMAKER_UPLOADING, OutsideCheckpoint, problems, within
from raycluster.checkpoints.store import QUARANTINE, by_step

log = logging.getLogger(__name__)


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

    def place(self, staged: Path, name: str, manifest: dict[str, dict]) -> None:
        for relpath in manifest:
            self.s3.upload_file(str(within(staged, relpath)), self.bucket, self._key(name, relpath))
        objects = self._objects(self._key(name) + "/")  # what the store holds now, not what was sent
        wrong = [r for r, entry in manifest.items() if objects.get(self._key(name, r)) != entry["size"]]
        if wrong:
            raise OSError(f"checkpoint {name}: {wrong[:3]} not at their manifest's size in {self.url}")
        shutil.rmtree(staged, ignore_errors=True)

    def commit(self, name: str, manifest: dict) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self._key(name, MANIFEST), Body=json.dumps(manifest, indent=1))

    def manifest(self, name: str) -> dict | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self._key(name, MANIFEST))["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def problems(self, name: str) -> str | None:
        manifest = self.manifest(name)
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
        with self._downloads:  # a copy verified before is not this name's any more
            cached = self._verified.pop(name, None)
        if cached is not None:
            shutil.rmtree(cached, ignore_errors=True)
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(name, MANIFEST))
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
            manifest = self.manifest(name) or {}
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
