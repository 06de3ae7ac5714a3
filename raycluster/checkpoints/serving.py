"""The keeper's side of a resume: which checkpoint it takes, which host serves each file of it, and the read lease
that holds it against retention while nodes assemble it. A component of ``CheckpointKeeper``: it is handed what
it reads (the root, the commit protocol's catalog, retention, the hosts) and owns none of it. Its decisions on
them run under the keeper's lock (a checkpoint's holders are read without it: written once, before the name is
complete), and nothing waits for a host while holding it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import ray

from raycluster.checkpoints.commits import Commits
from raycluster.checkpoints.hosts import HostRoots
from raycluster.checkpoints.manifest import CHUNK_BYTES
from raycluster.checkpoints.retention import Retention
from raycluster.faults import Faults

log = logging.getLogger(__name__)


class FetchServing:
    def __init__(
        self,
        store,
        lock,
        commits: Commits,
        retention: Retention,
        hosts: HostRoots,
        retain: Callable[[], None],
        faults: Faults,
    ):
        self.store, self._lock, self.commits, self.retention = store, lock, commits, retention
        self.hosts, self._retain, self.faults = hosts, retain, faults

    def newest_complete(self) -> str | None:
        """The newest checkpoint that passes its manifest; incomplete ones are moved aside, not deleted.
        One committed here from other hosts' parts is checked where it is read: by every fetch of it. The
        answer is held against retention for one read lease, so the fetches that follow find it."""
        self.faults.slow_resume_check()
        name = self._newest_complete()
        if name is not None:
            with self._lock:
                self.retention.lease(name, time.monotonic())  # never released: the lease alone holds it
            self._move_aside_unrecorded(older_than=name)
        return name

    def _move_aside_unrecorded(self, older_than: str) -> None:
        """Files of an older step that no record names (the other hosts' parts of a checkpoint whose place a dying
        part store or a stopped job took with it) can never be resumed from, and retention, which goes by records,
        would never remove them: moved aside, and every host's files of them removed."""
        for name in self.store.names():
            if int(name) >= int(older_than):
                break
            with self._lock:  # one this keeper committed has its record: no manifest read for it, each resume
                known = name in self.commits.placing or name in self.commits.complete
            try:
                unrecorded = not known and self.store.manifest(name) is None
            except Exception:  # a record that cannot be read is not this check's to judge
                unrecorded = False
            if unrecorded:
                self.quarantine(name, "no commit record: the parts of a checkpoint that never committed")

    def _newest_complete(self) -> str | None:
        # One with parts on hosts that are gone is passed over (named), never quarantined: its files are intact
        # where they lie (on SageMaker in S3 too, and a new job gets them back).
        out_of_reach: list[str] = []
        answered: dict = {}  # each part store asked once a call, however many checkpoints it holds parts of
        for name in reversed(self.store.names()):
            with self._lock:
                if name in self.commits.placing:  # not complete yet, nor broken
                    continue
                if name in self.retention.deleting:  # on its way out: a fetch of it would be refused
                    continue
            if name in self.commits.holders:
                gone = self.gone_holders(name, answered)
                if not gone:
                    return name
                out_of_reach.append(f"checkpoint {name} has parts on {', '.join(gone)}, which no longer answer")
                log.warning("%s: resuming from an older checkpoint", out_of_reach[-1])
                continue
            found, silent = self.found_on_hosts(name, answered)
            if found:
                return name
            if silent:
                out_of_reach.append(
                    f"checkpoint {name} has files on no host that answers ({', '.join(silent)} did not)"
                )
                log.warning("%s: resuming from an older checkpoint", out_of_reach[-1])
                continue
            reason = self._problems(name)
            if reason is None:
                return name
            self.quarantine(name, reason)
        if out_of_reach:  # never a silent start from scratch
            raise RuntimeError(f"no checkpoint can be resumed from: {'; '.join(out_of_reach)}")
        return None

    def found_on_hosts(self, name: str, answered: dict) -> tuple[bool, list[str]]:
        """``name`` was committed from parts by an earlier run on node-local roots (a cluster kept up, a local
        multi-node cluster): its record is in this root, its files on the hosts that placed them. Found there,
        every file at its size on a host that answers, it is a resume's to take (its bytes checked by the fetch).
        Else: the hosts that did not answer (none: every host answered, and the files are not there)."""
        record = None if self.store.shared else self.store.manifest(name)
        if record is None or len({e.get("part", 0) for e in record.values()}) < 2 or self._held_here(name, record):
            return False, []
        holders, silent = self.hosts.find(name, record, answered)
        if holders is None:
            return False, silent
        with self._lock:
            self.commits.holders[name] = holders
            self.commits.complete.add(name)
        hosts = len(set(holders.values()))
        log.info("checkpoint %s: its parts found on %d hosts' roots (an earlier run's)", name, hosts)
        return True, []

    def _held_here(self, name: str, record: dict[str, dict]) -> bool:
        """Every file of ``record`` is in this keeper's root at its size (a root SageMaker restored whole)."""
        for relpath, entry in record.items():
            path = self.store.local_file(name, relpath)
            if path is None or not path.is_file() or path.stat().st_size != entry["size"]:
                return False
        return True

    def _problems(self, name: str) -> str | None:
        """Why ``name`` is not complete. An S3 root is checked by its listing (names and sizes): reading every
        object here would double what a resume reads from S3. An object of the right size with other bytes is
        found by the fetch, which moves the checkpoint aside, so it costs one restart, never every one."""
        reason = self.store.problems(name)
        if reason is None:
            self.commits.complete.add(name)
        return reason

    def sources(self, name: str) -> dict[str, object]:
        """Who serves each file of ``name`` to a fetch: the host whose part it was, when committed here from
        parts to hosts' own roots; this keeper otherwise (its root holds the whole checkpoint: restored, local,
        or S3, which any host reads)."""
        me = ray.get_runtime_context().current_actor
        manifest = self.store.manifest(name)
        holders = {} if self.store.shared else self.commits.holders.get(name, {})
        return {relpath: holders.get(relpath, me) for relpath in manifest}

    def gone_holders(self, name: str, answered: dict) -> list[str]:
        """The hosts that hold parts of ``name`` and do not answer, by address: a fetch of ``name`` would fail at
        their files. None on a shared root (S3)."""
        holders = set() if self.store.shared else set(self.commits.holders.get(name, {}).values())
        return self.hosts.gone(holders, answered)

    def manifest(self, name: str) -> tuple[dict[str, dict], int]:
        """The start of a fetch: ``name``'s record, and the fetch's lease, which keeps it until ``release``."""
        with self._lock:
            lease = self.retention.lease(name, time.monotonic())
        record = self.store.manifest(name) if lease is not None and name in self.store.names() else None
        if record is None:
            if lease is not None:
                self.release(name, lease)
            raise RuntimeError(f"checkpoint {name} has no commit record in {self.store}")
        return record, lease

    def release(self, name: str, lease: int) -> None:
        """A fetch's end: what retention spared for it goes now, not at the next save."""
        with self._lock:
            freed = self.retention.fetch_ends(name, lease)
        if freed:
            self._retain()

    def touch(self, name: str) -> None:
        """A fetch reading from other hosts still holds ``name`` against retention."""
        with self._lock:
            self.retention.read(name, time.monotonic())

    def quarantine(self, name: str, reason: str) -> None:
        """``name`` is not what its manifest says (a fetch found it, or a resume's check): never resumed from
        again. Its record and what this root holds of it are moved aside, for a person to look at; every other
        host's files of it are removed (on SageMaker each host's root is synced to the job's S3 URI, where they
        would lie forever, named by no record)."""
        with self._lock:
            self.commits.complete.discard(name)
            self.commits.holders.pop(name, None)
            self.retention.forget(name)
        if name in self.store.names():
            self.store.quarantine(name, reason)
        self.hosts.delete_everywhere(name)  # after the move: on a shared root there is nothing left to remove

    def read(self, name: str, relpath: str, offset: int) -> bytes:
        self.touch(name)
        return self.store.read(name, relpath, offset, CHUNK_BYTES)
