"""The keeper's Ray-facing side of the commit protocol: each call decides through ``Commits`` under the keeper's
lock, then carries the effects out once the lock is released (calls to other hosts, the record's write). The
hosts call back (``part_arrived``, ``part_placed``), so no thread of the keeper waits for another host, whatever
their number. A component of ``CheckpointKeeper``: handed the root, the keeper's lock, ``Commits``, the holds and
the keeper's retention, and owning none of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from raycluster.checkpoints.commits import Commits
from raycluster.checkpoints.effects import Discard, Effect, Place, Published, Record, Remove, Said
from raycluster.checkpoints.holds import Holds
from raycluster.checkpoints.pacing import Pick
from raycluster.checkpoints.parts import Part

log = logging.getLogger(__name__)

WORDS = "words"
"""The concurrency group of the hosts' words (a part arrived, failed, placed): threads of their own, so a word is
taken in, and its moment stamped, while the keeper's other threads are busy (a resume hashing a restored
checkpoint, fetches reading it), and a part's deadline counts from when its host's word came, not from when
the keeper got round to it. A word holds its thread only for the keeper's lock, never for another host."""


class PartCommits:
    """The keeper's Ray-facing side of ``Commits``: each call decides under the keeper's lock, then carries the
    effects out (calls to other hosts, the record's write) once the lock is released."""

    def __init__(self, store, lock, commits: Commits, holds: Holds, retain: Callable[[], None]):
        self.store, self._lock, self.commits, self.holds, self._retain = store, lock, commits, holds, retain
        self.curves = None
        """The run's curves, told of each publish (its time and size), once the keeper is attached."""

    def begin_attempt(self, attempt: int) -> None:
        with self._lock:
            effects = self.commits.begin_attempt(attempt, time.monotonic())
        self._carry_out(effects)

    def saved(self, attempt: int, name: str) -> Pick | None:
        with self._lock:
            pick, effects = self.commits.saved(attempt, name, time.monotonic())
        self._carry_out(effects)
        return pick

    def pick(self) -> Pick | None:
        with self._lock:
            pick, effects = self.commits.pick(time.monotonic())
        self._carry_out(effects)
        return pick

    def arrived(self, name: str, attempt: int, part: int, parts: int, manifest: dict, holder) -> None:
        came = time.monotonic()  # before the lock: a word counts from when it came
        with self._lock:
            effects = self.commits.arrived(name, attempt, Part(part, manifest, holder), parts, came)
        self._carry_out(effects)

    def failed(self, name: str, attempt: int, part: int, cause: str) -> None:
        came = time.monotonic()
        with self._lock:
            effects = self.commits.failed(name, attempt, part, cause, came)
        self._carry_out(effects)

    def placed(self, name: str, attempt: int, part: int, error: str | None) -> None:
        came = time.monotonic()
        with self._lock:
            effects = self.commits.placed(name, attempt, part, error, came)
        self._carry_out(effects)

    def publishing(self) -> bool:
        """A publish is under way (a restart asks, and waits with a deadline of its own, before resuming)."""
        with self._lock:
            effects = self.commits.expire(time.monotonic())
            busy = bool(self.commits.placing)
        self._carry_out(effects)
        return busy

    def outcome(self, name: str) -> tuple[bool, str | None]:
        with self._lock:
            answer, effects = self.commits.outcome(name, time.monotonic())
        self._carry_out(effects)
        return answer

    def failures_by_name(self) -> dict[str, str]:
        """Every checkpoint not published (and not published since), with its cause."""
        with self._lock:
            return {name: reason for name, (_, reason) in self.commits.failures.items()}

    def _carry_out(self, effects: list[Effect]) -> None:
        for effect in effects:
            try:
                self._carry_out_one(effect)
            except Exception as exc:  # one that fails (an S3 error in retention, say) never drops the rest
                log.error(
                    "checkpoint keeper: %s of %s failed: %s", type(effect).__name__, getattr(effect, "name", ""), exc
                )

    def _carry_out_one(self, effect: Effect) -> None:
        if isinstance(effect, Place):
            effect.holder.place.remote(effect.name, effect.attempt, effect.part, effect.manifest, effect.whole)
        elif isinstance(effect, Discard):
            effect.holder.discard.remote(effect.name, effect.attempt, effect.part)
        elif isinstance(effect, Remove):
            effect.holder.delete.remote(effect.name, effect.attempt, effect.files)
        elif isinstance(effect, Record):
            self._record(effect)
        elif isinstance(effect, Published):
            self._published(effect)
        elif isinstance(effect, Said):
            log.log(effect.level, "%s", effect.line)

    def _record(self, record: Record) -> None:
        try:
            self.store.commit(record.name, record.record)
            error = None
        except Exception as exc:
            error = str(exc)
        with self._lock:
            effects = self.commits.recorded(record.name, record.attempt, error, time.monotonic())
            if any(isinstance(e, Published) for e in effects):
                self.holds.take(record.name)  # with complete: no retention, nor the run's end, may come between
        self._carry_out(effects)

    def _published(self, published: Published) -> None:
        name, complete = published.name, published.complete
        size = sum(e["size"] for e in published.record.values()) / 2**20
        log.info(
            "published checkpoint %s to %s: %d parts of attempt %d, %.1f MB, %.3fs after its first part, %.3fs after "
            "its last",
            name,
            self.store,
            len(complete.parts),
            complete.attempt,
            size,
            published.seconds,
            published.placed,
        )
        if self.curves is not None and name.isdigit():
            self.curves.log.remote(int(name), {"checkpoint/publish_s": published.seconds, "checkpoint/mb": size})
        self.holds.announce(name)
        if name.isdigit():
            self._retain()
