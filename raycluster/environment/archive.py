"""An environment as one archive, stored under its key: in S3 (``<uri>/<key>.tar``, its SHA-256 in the
object's metadata), where every later start of any job with that key finds it. An archive is unpacked beside
its place as it is hashed, and renamed into it only once it proved whole: a truncated or altered archive is
refused, never half used."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

DIGEST = "sha256"
CHUNK = 8 << 20


class Hashing:
    """A file read or written once: what passes is hashed on the way."""

    def __init__(self, f):
        self.f, self.digest = f, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.digest.update(data)
        return data

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.f.write(data)


def pack(directory: Path, archive: Path) -> str:
    """``directory``'s files into ``archive``, uncompressed: unpacking is what every start pays, and a gzip
    stream unpacks at a third of the pace the bytes arrive from S3 (``make bench ARGS="--only environment"``);
    the archive's SHA-256, taken as it is written."""
    with archive.open("wb") as f:
        writing = Hashing(f)
        with tarfile.open(fileobj=writing, mode="w|") as tar:
            tar.add(directory, arcname=".")
    return writing.digest.hexdigest()


def unpack(archive: Path, expected: str, into: Path) -> None:
    """``archive`` into ``into`` (absent before), if its SHA-256 is ``expected``: unpacked beside its place as it
    is read and hashed, and renamed in only once the whole archive proved to be what its record says; raises
    otherwise, leaving no ``into``."""
    partial = into.with_name(f".{into.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with archive.open("rb") as f:
            reading, broken = Hashing(f), None
            try:
                with tarfile.open(fileobj=reading, mode="r|") as tar:
                    tar.extractall(partial, filter="data")  # no links or paths out of it
            except tarfile.TarError as exc:  # said below, after what its record says about it
                broken = exc
            while reading.read(CHUNK):  # the rest: past the last member, or past where it broke
                pass
        found = reading.digest.hexdigest()
        if found != expected:
            raise ValueError(f"its SHA-256 is {found[:12]}…, its record says {expected[:12]}…")
        if broken is not None:
            raise broken
        partial.rename(into)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


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
