"""The keeper's side of a fetch: which host serves each file of a checkpoint, and the read lease that holds a
checkpoint against retention while nodes assemble it. Mixed into ``CheckpointKeeper``, whose state it shares."""

from __future__ import annotations

import time

import ray

from raycluster.checkpoints.manifest import CHUNK_BYTES


class FetchServing:
    def sources(self, name: str) -> dict[str, object]:
        """Who serves each file of ``name`` to a fetch: the host whose part it was, when committed here from
        parts; this keeper otherwise (its root holds the whole checkpoint: restored, local or S3)."""
        me = ray.get_runtime_context().current_actor
        manifest = self.store.manifest(name)
        return {relpath: self.commits.holders.get(name, {}).get(relpath, me) for relpath in manifest}

    def manifest(self, name: str) -> dict[str, dict]:
        """The start of a fetch: ``name`` is kept until ``release``."""
        with self._lock:
            deleting = name in self._deleting
            self._readers[name] += 1
            self._read_at[name] = time.monotonic()
        record = self.store.manifest(name) if not deleting and name in self.store.names() else None
        if record is None:
            self.release(name)
            raise RuntimeError(f"checkpoint {name} has no commit record in {self.store}")
        return record

    def release(self, name: str) -> None:
        with self._lock:
            self._readers[name] -= 1

    def touch(self, name: str) -> None:
        """A fetch reading from other hosts still holds ``name`` against retention."""
        self._read_at[name] = time.monotonic()

    def quarantine(self, name: str, reason: str) -> None:
        """A fetch found ``name`` is not what its manifest says: never resumed from again."""
        with self._lock:
            self.commits.complete.discard(name)
            self.commits.holders.pop(name, None)
        if name in self.store.names():
            self.store.quarantine(name, reason)

    def read(self, name: str, relpath: str, offset: int) -> bytes:
        self._read_at[name] = time.monotonic()
        return self.store.read(name, relpath, offset, CHUNK_BYTES)
