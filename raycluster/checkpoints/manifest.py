"""What makes a checkpoint complete: a manifest of every file's size and checksum, written last."""

from __future__ import annotations

import hashlib
from pathlib import Path

import xxhash

CHUNK_BYTES = 8 * 1024**2
MANIFEST = "raycluster_manifest.json"
# SageMaker's checkpoint sync marks files it is still uploading (or restoring) with this suffix.
SAGEMAKER_UPLOADING = ".sagemaker-uploading"


class OutsideCheckpoint(ValueError):
    """A manifest entry or object key that would name a file outside its checkpoint directory."""


def inside(directory: Path, relpath: str) -> Path:
    """``directory / relpath``, refused unless it stays inside ``directory`` (a manifest or an S3 key is
    input like any other: ``../x`` or ``/etc/x`` would write anywhere on the host, as root)."""
    parts = Path(relpath).parts
    if not relpath or Path(relpath).is_absolute() or ".." in parts or "\\" in relpath:
        raise OutsideCheckpoint(f"{relpath!r} is not a path inside the checkpoint")
    return directory / relpath


DIGESTS = {"xxh3_128": xxhash.xxh3_128, "sha256": hashlib.sha256}
"""The checksums a record may name for a file. A record is written with xxh3_128: what it must catch is a file
that is not what was written (truncated, half copied, changed on disk), which a 128-bit hash does as well as
SHA-256, at about 13 GB/s a core here against SHA-256's 1.5 (`make bench ARGS="--only hashes"`), so hashing a
40 GB part costs its host 3 s of CPU, not 27. It is no defence against someone who can write the checkpoint's
files, and SHA-256 would be none either: they can rewrite the record beside them. Records written with SHA-256
(by an earlier raycluster) are still read."""
WRITTEN = "xxh3_128"


def file_digest(path: Path, algorithm: str = WRITTEN) -> str:
    digest = DIGESTS[algorithm]()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_of(directory: Path) -> dict[str, dict]:
    return {
        str(p.relative_to(directory)): {"size": p.stat().st_size, WRITTEN: file_digest(p)}
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def problems(directory: Path, manifest: dict[str, dict] | None) -> str | None:
    """Why ``directory`` is not the complete checkpoint its manifest describes, or None if it is."""
    if manifest is None:
        return "no manifest (an upload that never finished)"
    leftovers = [p.name for p in directory.rglob(f"*{SAGEMAKER_UPLOADING}")]
    if leftovers:
        return f"SageMaker upload leftovers {leftovers}"
    for relpath, want in manifest.items():
        try:
            path = inside(directory, relpath)
        except OutsideCheckpoint as exc:
            return f"manifest entry {exc}"
        if not path.is_file():
            return f"missing {relpath}"
        if path.stat().st_size != want["size"]:
            return f"{relpath} is {path.stat().st_size} bytes, manifest says {want['size']}"
        algorithm = next((name for name in DIGESTS if name in want), None)
        if algorithm is None:
            return f"{relpath} has no checksum this raycluster reads ({', '.join(DIGESTS)})"
        if file_digest(path, algorithm) != want[algorithm]:
            return f"{relpath} fails its checksum"
    return None
