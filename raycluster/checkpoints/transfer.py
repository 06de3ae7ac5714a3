"""Moving checkpoint directories between a worker's node and the keeper, one bounded chunk at a time,
and rank 0's background shipper that never makes training wait for an upload."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import ray

from raycluster.checkpoints.manifest import CHUNK_BYTES as CHUNK
from raycluster.checkpoints.manifest import manifest_of, problems, within

log = logging.getLogger(__name__)

GATHER_TIMEOUT_S = 600.0
"""How long a host's part of a checkpoint waits for the other hosts' parts (they save at the same step)."""


def send_directory(keeper, source: Path, name: str, part: int = 0, parts: int = 1) -> str | None:
    """Hand ``source`` to the keeper and publish it as ``name``: directly when both are on one node, else
    streamed through Ray in bounded chunks. On any error nothing is published. With ``parts`` > 1, ``source``
    is this host's part of ``name`` (a missing directory is an empty part): published with the last part to
    arrive, None before."""
    source = Path(source).resolve()
    manifest = manifest_of(source)
    token = ray.get(keeper.begin.remote())
    try:
        if ray.get(keeper.node_id.remote()) == ray.get_runtime_context().get_node_id():
            ray.get(keeper.adopt.remote(token, str(source), manifest))
            return ray.get(keeper.commit.remote(token, name, manifest, part, parts))
        for relpath in manifest:
            with within(source, relpath).open("rb") as f:
                offset, chunk = 0, f.read(CHUNK)
                while True:
                    ray.get(keeper.write.remote(token, relpath, offset, chunk))
                    offset += len(chunk)
                    chunk = f.read(CHUNK)
                    if not chunk:
                        break
        return ray.get(keeper.commit.remote(token, name, manifest, part, parts))
    except BaseException:
        keeper.abort.remote(token)
        raise


def fetch_directory(keeper, name: str, target: Path) -> bool:
    """Make ``target`` hold the keeper's ``name``; fetched only if missing or different. True if fetched."""
    manifest = ray.get(keeper.manifest.remote(name))  # holds `name` against retention until released
    try:
        if target.is_dir() and problems(target, manifest) is None:
            return False
        staged = target.with_name(f".{target.name}.fetching-{os.getpid()}")
        shutil.rmtree(staged, ignore_errors=True)
        for relpath in manifest:
            path = within(staged, relpath)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as f:
                while data := ray.get(keeper.read.remote(name, relpath, f.tell())):
                    f.write(data)
    finally:
        keeper.release.remote(name)
    if target.exists():
        shutil.rmtree(target)
    staged.rename(target)
    log.info("fetched checkpoint %s from the keeper into %s", name, target)
    return True


def prune_older(published: Path) -> None:
    """Once the keeper holds ``published``, rank 0's older local checkpoints serve nothing (a resume takes
    ``last`` or the keeper's): removed, so node-local scratch does not grow with the length of the run."""
    if not published.parent.is_dir():  # an empty part: this host's ranks wrote nothing
        return
    for older in published.parent.iterdir():
        if older.name.isdigit() and int(older.name) < int(published.name):
            shutil.rmtree(older, ignore_errors=True)


class Shipper:
    """Uploads rank 0's checkpoints in a background thread with a queue of one: a checkpoint that is
    still waiting when a newer one is saved is skipped (logged), the one in flight always completes."""

    def __init__(
        self,
        keeper,
        on_published: Callable[[str, float, int], None] | None = None,
        part: int = 0,
        parts: int = 1,
    ):
        """``on_published(name, seconds, bytes)``: after each checkpoint the keeper has published.
        ``part`` of ``parts``: this host's part of checkpoints that every host saves (LeRobot main)."""
        self.keeper, self.on_published, self.part, self.parts = keeper, on_published, part, parts
        self._pending: Path | None = None
        self._busy = False
        self._cond = threading.Condition()
        self.skipped: list[str] = []
        self.failed: dict[str, str] = {}
        """Checkpoint name -> why its upload failed (read at the end: a lost newest checkpoint fails the run)."""
        threading.Thread(target=self._run, name="checkpoint-shipper", daemon=True).start()

    def submit(self, checkpoint_dir: Path) -> None:
        with self._cond:
            if self._pending is not None:
                self.skipped.append(self._pending.name)
                log.warning(
                    "checkpoint %s superseded by %s before its upload started: skipped",
                    self._pending.name,
                    checkpoint_dir.name,
                )
            self._pending = Path(checkpoint_dir)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None:
                    self._cond.wait()
                source, self._pending, self._busy = self._pending, None, True
            try:
                started = time.monotonic()
                size = sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
                if send_directory(self.keeper, source, source.name, self.part, self.parts) is None:
                    self._wait_for_other_hosts(source.name)
                if self.on_published is not None:
                    self.on_published(source.name, time.monotonic() - started, size)
                prune_older(source)
            except Exception as exc:  # an upload failure must not stop training; the next save retries
                cause = getattr(exc, "cause", None) or exc  # Ray wraps the keeper's own error
                self.failed[source.name] = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
                log.error(
                    "upload of checkpoint %s failed (training goes on; the next save retries): %s",
                    source.name,
                    self.failed[source.name],
                )
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _wait_for_other_hosts(self, name: str) -> None:
        if not ray.get(self.keeper.gathered.remote(name, GATHER_TIMEOUT_S)):
            raise RuntimeError(f"not every host's part of checkpoint {name} arrived within {GATHER_TIMEOUT_S:.0f} s")

    def drain(self, timeout: float | None = None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout)
