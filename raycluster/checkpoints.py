"""The checkpoint keeper: a Ray actor on the driver's node that owns a directory on that node and
publishes what rank 0 sends it, atomically.

Rank 0 may run on any node, and ``/opt/ml/model`` / ``/opt/ml/checkpoints`` are node-local, so files
travel through Ray in bounded chunks, land under a temporary name, are checked against a manifest of
sizes and SHA-256 sums, and only then are renamed into place: a reader never sees half a directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024**2
MANIFEST = "raycluster_manifest.json"


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


@ray.remote(num_cpus=0, max_concurrency=4)
class CheckpointKeeper:
    def __init__(self, root: str):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def begin(self) -> str:
        token = uuid.uuid4().hex[:12]
        (self.root / f".incoming-{token}").mkdir()
        return token

    def write(self, token: str, relpath: str, offset: int, data: bytes) -> None:
        path = self.root / f".incoming-{token}" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("r+b" if offset else "wb") as f:
            f.seek(offset)
            f.write(data)

    def commit(self, token: str, name: str, manifest: dict[str, dict]) -> str:
        incoming = self.root / f".incoming-{token}"
        got = manifest_of(incoming)
        if got != manifest:
            shutil.rmtree(incoming)
            raise RuntimeError(f"{name}: received files differ from the sender's manifest")
        (incoming / MANIFEST).write_text(json.dumps(manifest, indent=1))
        _fsync_tree(incoming)
        final = self.root / name
        if final.exists():
            # Replace: the old copy is renamed away first, so `final` is always whole or absent.
            old = self.root / f".replaced-{token}"
            final.rename(old)
            incoming.rename(final)
            shutil.rmtree(old)
        else:
            incoming.rename(final)
        log.info("published %s", final)
        return str(final)

    def abort(self, token: str) -> None:
        shutil.rmtree(self.root / f".incoming-{token}", ignore_errors=True)


def _fsync_tree(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())


def keeper_on_this_node(root: Path):
    """A keeper pinned to the caller's node (the driver's: the head on SageMaker)."""
    node_id = ray.get_runtime_context().get_node_id()
    return CheckpointKeeper.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    ).remote(str(root))


def send_directory(keeper, source: Path, name: str) -> str:
    """Stream ``source`` to the keeper, one bounded chunk in flight, and publish it as ``name``."""
    source = Path(source).resolve()
    manifest = manifest_of(source)
    token = ray.get(keeper.begin.remote())
    try:
        for relpath in manifest:
            with (source / relpath).open("rb") as f:
                offset = 0
                while chunk := f.read(CHUNK_BYTES):
                    ray.get(keeper.write.remote(token, relpath, offset, chunk))
                    offset += len(chunk)
                if offset == 0:
                    ray.get(keeper.write.remote(token, relpath, 0, b""))
        return ray.get(keeper.commit.remote(token, name, manifest))
    except BaseException:
        keeper.abort.remote(token)
        raise
