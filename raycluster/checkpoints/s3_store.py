"""An S3 prefix as a checkpoint store: files first, the manifest object last."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

from raycluster.checkpoints.manifest import MANIFEST, SAGEMAKER_UPLOADING, OutsideCheckpoint, inside
from raycluster.checkpoints.store import QUARANTINE, by_step

log = logging.getLogger(__name__)


class S3Store:
    """``s3://bucket/prefix``: files first, the manifest object last, so a listing never shows a
    checkpoint with a manifest whose files are missing."""

    checks_content = False  # a listing gives sizes; the bytes are checked where a fetch assembles them
    shared = True

    def __init__(self, url: str, client=None):
        import boto3
        from botocore.config import Config

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"{url!r} is not s3://bucket/prefix")
        self.url, self.bucket, self.prefix = url, bucket, prefix.strip("/")
        # Each request bounded: an endpoint that stops answering fails a call within three tries of at most 70 s,
        # never holds one of the keeper's or a part store's threads for good; a large upload's parts are each a
        # request, so it goes on as long as its bytes move.
        config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3, "mode": "standard"})
        self.s3 = client or boto3.client("s3", config=config)

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
            self.s3.upload_file(str(inside(staged, relpath)), self.bucket, self._key(name, relpath))
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
                inside(Path(name), relpath)
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
        self.s3.delete_object(Bucket=self.bucket, Key=self._key(name, MANIFEST))
        self._delete_keys(list(self._objects(self._key(name) + "/")))

    def delete_files(self, name: str, relpaths: tuple[str, ...]) -> None:
        """Only these files of ``name`` (one host's part of a placement that failed: the others' stay)."""
        self._delete_keys([self._key(name, relpath) for relpath in relpaths])

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1000 keys a call
            self.s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]]}
            )

    def local_file(self, name: str, relpath: str) -> None:
        return None

    def read(self, name: str, relpath: str, offset: int, size: int) -> bytes:
        """A ranged GET of that one object: no host downloads a checkpoint to serve one file of it, and nothing
        is cached to outlive it (the bytes are checked against the manifest where the fetch assembles them)."""
        inside(Path(name), relpath)  # a relpath from a request: never a key outside the checkpoint
        key = self._key(name, relpath)
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={offset}-{offset + size - 1}")
        except self.s3.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":  # at or past the object's end
                return b""
            raise
        return response["Body"].read()

    def __str__(self) -> str:
        return self.url
