"""What makes a checkpoint complete: a manifest of every file's size and SHA-256, written last."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 8 * 1024**2
MANIFEST = "raycluster_manifest.json"
# SageMaker's checkpoint sync marks files it is still uploading (or restoring) with this suffix.
SAGEMAKER_UPLOADING = ".sagemaker-uploading"


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
        path = directory / relpath
        if not path.is_file():
            return f"missing {relpath}"
        if path.stat().st_size != want["size"]:
            return f"{relpath} is {path.stat().st_size} bytes, manifest says {want['size']}"
        if file_digest(path) != want["sha256"]:
            return f"{relpath} fails its checksum"
    return None
