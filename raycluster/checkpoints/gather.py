"""A checkpoint that every host saved a part of (LeRobot main's sharded saves: each rank's DCP shards on its
own host), merged into one directory under one manifest before the keeper publishes it."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from raycluster.checkpoints.manifest import within


def merge_parts(staging: Path, name: str, parts: dict[int, tuple[str, dict]]) -> tuple[Path, dict[str, dict]]:
    """Every host's part of ``name`` (``part -> (staged token, manifest)``) moved into one staged directory,
    with the union of their manifests; a file that two hosts hold with different contents is refused. The
    parts' own staging is removed either way."""
    merged, union = staging / f"{name}-gathered-{uuid.uuid4().hex[:8]}", {}
    try:
        for part in sorted(parts):
            token, manifest = parts[part]
            for relpath, entry in manifest.items():
                if union.get(relpath, entry) != entry:
                    raise RuntimeError(f"checkpoint {name}: hosts hold different {relpath}")
                target = within(merged, relpath)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(within(staging / token, relpath), target)
                union[relpath] = entry
    except BaseException:
        shutil.rmtree(merged, ignore_errors=True)
        raise
    finally:
        for token, _ in parts.values():
            shutil.rmtree(staging / token, ignore_errors=True)
    return merged, union
