"""What makes a checkpoint complete: a manifest of every file's size and SHA-256, written last."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 8 * 1024**2
MANIFEST = "raycluster_manifest.json"
# SageMaker's checkpoint sync marks files it is still uploading (or restoring) with this suffix.
SAGEMAKER_UPLOADING = ".sagemaker-uploading"


class OutsideCheckpoint(ValueError):
    """A manifest entry or object key that would name a file outside its checkpoint directory."""


def within(directory: Path, relpath: str) -> Path:
    """``directory / relpath``, refused unless it stays inside ``directory`` (a manifest or an S3 key is
    input like any other: ``../x`` or ``/etc/x`` would write anywhere on the host, as root)."""
    parts = Path(relpath).parts
    if not relpath or Path(relpath).is_absolute() or ".." in parts or "\\" in relpath:
        raise OutsideCheckpoint(f"{relpath!r} is not a path inside the checkpoint")
    return directory / relpath


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_of(directory: Path) -> dict[str, dict]:
    return {
        str(p.relative_to(directory)): {"size": p.stat().st_size, "sha256": file_digest(p)}
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
            path = within(directory, relpath)
        except OutsideCheckpoint as exc:
            return f"manifest entry {exc}"
        if not path.is_file():
            return f"missing {relpath}"
        if path.stat().st_size != want["size"]:
            return f"{relpath} is {path.stat().st_size} bytes, manifest says {want['size']}"
        if file_digest(path) != want["sha256"]:
            return f"{relpath} fails its checksum"
    return None
