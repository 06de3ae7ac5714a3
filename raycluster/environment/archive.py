"""An environment as one archive, stored under its key: in S3 (``<uri>/<key>.tar``, its SHA-256 in the
object's metadata), where every later start of any job with that key finds it (``unpacking.py`` restores it)."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

DIGEST = "sha256"


class Hashing:
    """A file written once: what passes is hashed on the way."""

    def __init__(self, f):
        self.f, self.digest = f, hashlib.new(DIGEST)

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.f.write(data)


def pack(directory: Path, archive: Path) -> str:
    """``directory``'s files into ``archive``, uncompressed: unpacking is what every start pays, and a gzip
    stream unpacks at a third of the pace the bytes arrive from S3 (``make bench ARGS="--only environment"``);
    the archive's SHA-256, taken as it is written. GNU's format, not POSIX's: it keeps mtimes in whole seconds,
    as compiled modules check them, and so gives most members one header where POSIX's gives two (an unpack
    reads every header in one process)."""
    with archive.open("wb") as f:
        writing = Hashing(f)
        with tarfile.open(fileobj=writing, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            tar.add(directory, arcname=".")
    return writing.digest.hexdigest()


class S3Archives:
    """Archives under an ``s3://bucket/prefix`` URI, through boto3 (the image's)."""

    def __init__(self, uri: str, client=None):
        import boto3

        self.bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        self.prefix = prefix.strip("/")
        self.s3 = client or boto3.client("s3")
        self.uri = uri.rstrip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}.tar" if self.prefix else f"{key}.tar"

    def fetch(self, key: str, archive: Path) -> str | None:
        """The archive of ``key`` downloaded to ``archive``, with the digest its record holds; None if there is
        none (the first start with this key)."""
        from botocore.exceptions import ClientError

        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        self.s3.download_file(self.bucket, self._key(key), str(archive))
        return head.get("Metadata", {}).get(DIGEST, "")

    def store(self, key: str, archive: Path, digest: str) -> str:
        self.s3.upload_file(str(archive), self.bucket, self._key(key), ExtraArgs={"Metadata": {DIGEST: digest}})
        return f"s3://{self.bucket}/{self._key(key)}"
