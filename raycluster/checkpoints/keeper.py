"""The checkpoint keeper: a Ray actor on the driver's node (the head on SageMaker) that owns one
checkpoint root, so only one host ever writes it (all SageMaker hosts share one S3 URI).

Rank 0 may run on any node, so files travel through Ray in bounded chunks into a staging directory on
the keeper's node, are checked against the sender's manifest, and only then published to the store.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.checkpoints.gather import merge_parts
from raycluster.checkpoints.manifest import CHUNK_BYTES, MANIFEST, within
from raycluster.checkpoints.store import LocalStore, open_store

log = logging.getLogger(__name__)

TESTING_PUBLISH_DELAY = "RAYCLUSTER_TESTING_PUBLISH_DELAY_S"
"""Fault injection, for tests only (like Ray's own ``RAY_testing_*``): every publish waits this long after
staging, so a test can stop a job while a checkpoint or the final model is being published."""
READ_LEASE_S = 300.0
"""How long a fetch holds its checkpoint against retention without reading a chunk."""


@ray.remote(num_cpus=0, max_concurrency=4)
class CheckpointKeeper:
    def __init__(self, root: str, keep: int = 0, store=None, staging_dir: str = "", read_lease_s: float = READ_LEASE_S):
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        self.store = store or open_store(root)
        self.keep = keep
        if staging_dir:
            Path(staging_dir).mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix="raycluster-staging-", dir=staging_dir or None))
        # A restarted worker group fetches while the previous attempt's publish may still run (calls come
        # from several threads): retention spares what is being read, quarantine what is being published.
        self._lock = threading.Lock()
        self._published = threading.Condition(self._lock)
        self._readers: Counter[str] = Counter()
        # A fetch that has read nothing for read_lease_s (its worker died mid-fetch) no longer holds a checkpoint.
        self._read_at: dict[str, float] = {}
        self.read_lease_s = read_lease_s
        self._publishing: set[str] = set()
        # Checked once (published here, or verified against its manifest): never hashed again in this run,
        # neither at each save's retention nor in the stop window.
        self._complete: set[str] = set()
        # A checkpoint saved by every host (LeRobot main's sharded saves): name -> {part: (token, manifest)}
        # until the last host's part arrives.
        self._parts: dict[str, dict[int, tuple[str, dict]]] = {}

    # -- receiving -------------------------------------------------------------------------------
    def begin(self) -> str:
        token = uuid.uuid4().hex[:12]
        (self.staging / token).mkdir()
        return token

    def write(self, token: str, relpath: str, offset: int, data: bytes) -> None:
        path = within(self.staging / token, relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("r+b" if offset else "wb") as f:
            f.seek(offset)
            f.write(data)

    def commit(self, token: str, name: str, manifest: dict[str, dict], part: int = 0, parts: int = 1) -> str | None:
        """Publish what ``token`` received as ``name``; with ``parts`` > 1 it is one host's part of ``name``,
        which is published, as one checkpoint with one manifest, once every part has arrived (None until then)."""
        staged = self.staging / token
        received = {str(p.relative_to(staged)): p.stat().st_size for p in staged.rglob("*") if p.is_file()}
        # Sizes here; the checksums are checked whenever a checkpoint is resumed from. Hashing every upload
        # twice would take CPU from training on the keeper's node for no gain over that.
        if received != {relpath: entry["size"] for relpath, entry in manifest.items()}:
            shutil.rmtree(staged)
            raise RuntimeError(f"checkpoint {name}: received files differ from the sender's manifest")
        with self._lock:
            if parts > 1:
                self._parts.setdefault(name, {})[part] = (token, manifest)
                if len(self._parts[name]) < parts:
                    return None
                every_part = self._parts.pop(name)
            self._publishing.add(name)
        try:
            if parts > 1:
                staged, manifest = merge_parts(self.staging, name, every_part)
            (staged / MANIFEST).write_text(json.dumps(manifest, indent=1))
            if delay := float(os.environ.get(TESTING_PUBLISH_DELAY, 0)):
                log.info("testing: holding the publish of %s for %gs (%s)", name, delay, TESTING_PUBLISH_DELAY)
                time.sleep(delay)
            self.store.publish(staged, name)
            self._complete.add(name)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)  # a refused upload (or merge) keeps nothing on disk
            raise
        finally:
            with self._lock:
                self._publishing.discard(name)
                self._published.notify_all()
        log.info("published checkpoint %s to %s", name, self.store)
        if name.isdigit():
            self._drop_parts_older_than(int(name))
            self._retain()
        return name

    def _drop_parts_older_than(self, step: int) -> None:
        """Parts of an older checkpoint whose other hosts never delivered (a host lost mid-save) are dropped."""
        with self._lock:
            stale = [name for name in self._parts if name.isdigit() and int(name) < step]
            dropped = [self._parts.pop(name) for name in stale]
            self._published.notify_all()
        for parts in dropped:
            for token, _ in parts.values():
                shutil.rmtree(self.staging / token, ignore_errors=True)
        if stale:
            log.warning("checkpoints %s: dropped, some hosts' parts never arrived", stale)

    def gathered(self, name: str, timeout: float) -> bool:
        """Wait up to ``timeout`` s until every host's part of ``name`` has arrived and it is published."""
        with self._published:
            return self._published.wait_for(
                lambda: name not in self._parts and name not in self._publishing, timeout=timeout
            )

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def adopt(self, token: str, source: str, manifest: dict[str, dict]) -> None:
        """Rank 0 on this node: take its files directly, hard-linked where the filesystem allows (LeRobot
        never rewrites a saved checkpoint), so nothing is copied through Ray."""
        for relpath in manifest:
            target = within(self.staging / token, relpath)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(within(Path(source), relpath), target)
            except OSError:
                shutil.copy2(within(Path(source), relpath), target)

    def abort(self, token: str) -> None:
        shutil.rmtree(self.staging / token, ignore_errors=True)

    def _retain(self) -> None:
        """Keep the newest ``keep`` complete checkpoints; the newest complete one is never deleted."""
        if self.keep < 1:
            return
        complete = self.complete_names()
        for name in complete[: -self.keep]:
            with self._lock:
                if self._readers[name] and time.monotonic() - self._read_at[name] < self.read_lease_s:
                    log.info("retention: checkpoint %s is being fetched; deleted at a later save", name)
                    continue
            self.store.delete(name)
            self._complete.discard(name)
            log.info("retention (keep %d): deleted checkpoint %s", self.keep, name)

    # -- handing back -----------------------------------------------------------------------------
    def newest_complete(self, settle_s: float = 0.0) -> str | None:
        """The newest checkpoint that passes its manifest; incomplete ones are moved aside, not deleted.
        ``settle_s``: first wait up to this long for publishes in flight (a failed attempt's last upload)."""
        with self._published:
            self._published.wait_for(lambda: not self._publishing, timeout=settle_s)
        for name in reversed(self.store.names()):
            with self._lock:
                if name in self._publishing:  # not complete yet, and not broken either
                    continue
            reason = self._problems(name)
            if reason is None:
                return name
            self.store.quarantine(name, reason)
            self._complete.discard(name)
        return None

    def _problems(self, name: str) -> str | None:
        """Why ``name`` is not complete, read whole as a resume will read it (an S3 object of the right size
        with the wrong bytes passes a listing, then would fail every fetch, restart after restart)."""
        reason = self.store.problems(name)
        if reason is None and not self.store.checks_content:
            try:
                self.store.local_copy(name)
            except RuntimeError as exc:
                reason = str(exc)
        if reason is None:
            self._complete.add(name)
        return reason

    def manifest(self, name: str) -> dict[str, dict]:
        """The start of a fetch: ``name`` is kept until ``release``."""
        with self._lock:
            self._readers[name] += 1
            self._read_at[name] = time.monotonic()
        try:
            return json.loads((self.store.local_copy(name) / MANIFEST).read_text())
        except Exception:
            self.release(name)
            raise

    def release(self, name: str) -> None:
        with self._lock:
            self._readers[name] -= 1

    def read(self, name: str, relpath: str, offset: int) -> bytes:
        self._read_at[name] = time.monotonic()
        with within(self.store.local_copy(name), relpath).open("rb") as f:
            f.seek(offset)
            return f.read(CHUNK_BYTES)

    def complete_names(self) -> list[str]:
        """Every complete checkpoint, oldest step first: each checked against its manifest once in this keeper's
        life (what it published itself, never), so that neither a save's retention nor the stop window hashes
        every kept checkpoint again. A resume (``newest_complete``) reads its checkpoint in full."""
        return [n for n in self.store.names() if self._listed_complete(n)]

    def _listed_complete(self, name: str) -> bool:
        if name in self._complete:
            return True
        complete = self.store.problems(name) is None  # S3: names and sizes only, no download
        if complete and self.store.checks_content:
            self._complete.add(name)
        return complete

    def complete_steps(self) -> list[int]:
        return [int(n) for n in self.complete_names()]


def keeper_on_this_node(root: str, keep: int = 0, local_name_root: bool = False, staging_dir: str = ""):
    """A keeper pinned to the caller's node (the driver's). ``local_name_root``: ``root`` itself holds
    the published names (e.g. ``/opt/ml/model/pretrained_model``), not ``root/checkpoints``.
    ``staging_dir``: where checkpoints are assembled, on the root's filesystem (default: a temp dir)."""
    node_id = ray.get_runtime_context().get_node_id()
    return CheckpointKeeper.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    ).remote(root, keep, LocalStore(Path(root)) if local_name_root else None, staging_dir)
