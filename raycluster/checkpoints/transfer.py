"""A committed checkpoint fetched onto a node, one bounded chunk at a time, from every host that holds a part of
it; and rank 0's older local checkpoints pruned once the keeper holds a newer one."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import ray

from raycluster.checkpoints.manifest import inside, problems
from raycluster.checkpoints.part_store import link_or_copy
from raycluster.checkpoints.scratch import owned_suffix, remove_orphans

log = logging.getLogger(__name__)


READ_TIMEOUT_S = 120.0
"""One chunk from another host, or one answer of the keeper's: a host that does not answer in this long fails
the fetch (and the attempt)."""


def _copy_from(source, keeper, name: str, relpath: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        while data := ray.get(source.read.remote(name, relpath, f.tell()), timeout=READ_TIMEOUT_S):
            f.write(data)
            keeper.touch.remote(name)  # a long read from another host still holds the checkpoint


def fetch_directory(keeper, name: str, target: Path, local=None, only: str = "") -> bool:
    """Make ``target`` hold the keeper's ``name`` (the files under ``only``, when given); fetched only if
    missing or different. Files this node's part store (``local``) holds are linked from its root; the rest
    come from the host that holds each (an S3 root: ``local`` reads each file's own object, nothing more). What
    arrives is checked against the manifest: a checkpoint that is not what it says is quarantined at the keeper
    and refused here. True if anything was fetched."""
    # Holds `name` against retention until released.
    manifest, lease = ray.get(keeper.manifest.remote(name), timeout=READ_TIMEOUT_S)
    manifest = {r: e for r, e in manifest.items() if not only or Path(r).parts[0] == only}
    try:
        if target.is_dir() and problems(target, manifest) is None:
            return False
        sources = ray.get(keeper.sources.remote(name), timeout=READ_TIMEOUT_S)
        # An S3 root: this node's own part store reads each file from S3, and no other host reads a byte for it.
        shared = local is not None and ray.get(local.shared_root.remote(), timeout=READ_TIMEOUT_S)
        if shared:
            sources = dict.fromkeys(manifest, local)
        held = (
            {} if local is None or shared else ray.get(local.local_files.remote(name, manifest), timeout=READ_TIMEOUT_S)
        )
        # A fetch killed with its worker left its files here: the next one removes them.
        remove_orphans(target.parent, f".{target.name}.fetching.scratch-*")
        staged = target.with_name(f".{target.name}.fetching{owned_suffix()}")
        shutil.rmtree(staged, ignore_errors=True)
        try:
            for relpath in manifest:
                if relpath in held:
                    link_or_copy(Path(held[relpath]), inside(staged, relpath))
                else:
                    _copy_from(sources[relpath], keeper, name, relpath, inside(staged, relpath))
            reason = problems(staged, manifest)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        if reason is not None:
            shutil.rmtree(staged, ignore_errors=True)
            ray.get(keeper.quarantine.remote(name, f"fetched: {reason}"), timeout=READ_TIMEOUT_S)
            raise RuntimeError(f"checkpoint {name} is not what its manifest says ({reason}): moved aside")
    finally:
        keeper.release.remote(name, lease)
    if target.exists():
        shutil.rmtree(target)
    staged.rename(target)
    log.info("fetched checkpoint %s into %s (%d of %d files from this node)", name, target, len(held), len(manifest))
    return True


def prune_older(published: Path) -> None:
    """Once the keeper holds ``published``, rank 0's older local checkpoints serve nothing (a resume takes
    ``last`` or the keeper's): removed, so node-local scratch does not grow with the length of the run."""
    if not published.parent.is_dir():  # an empty part: this host's ranks wrote nothing
        return
    for older in published.parent.iterdir():
        if older.name.isdigit() and int(older.name) < int(published.name):
            shutil.rmtree(older, ignore_errors=True)
