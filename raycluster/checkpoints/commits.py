"""The keeper's side of the commit protocol: the lead host tells of its saves and every host asks which one to
stage (``Pacer``: the same steps on every host), parts arrive from every host's part store, a complete set of
one attempt is placed by every host at once, and the commit record is written after the last part is in place.

Each method returns at once; the hosts call back (``part_arrived``, ``part_placed``), so no thread of the keeper
waits for another host, whatever their number. Every decision is taken under the keeper's lock together with
the state it changes; the calls it makes to other hosts go out after. Mixed into ``CheckpointKeeper``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from raycluster.checkpoints.pacing import Pick
from raycluster.checkpoints.parts import Complete, GivenUp, Part

log = logging.getLogger(__name__)

PLACE_DEADLINE_S = 300.0
"""How long every host together may take to place a complete set (renames; S3: uploads) before it fails."""


def commit_record(complete: Complete) -> dict[str, dict]:
    """Every file of every part: its size and SHA-256, and the part and attempt it came from."""
    return {
        relpath: {**entry, "part": part.part, "attempt": complete.attempt}
        for part in complete.parts.values()
        for relpath, entry in part.manifest.items()
    }


@dataclass
class Placing:
    """A complete set being placed: the name stays taken until every host has answered, or the deadline."""

    complete: Complete
    waiting: set[int]
    started: float
    errors: dict[int, str] = field(default_factory=dict)


def paced(pick: Pick | None) -> None:
    if pick is not None and pick.passed_over:
        log.info("checkpoint pace: every host stages %s next, %d newer save(s) passed over (a host was still staging)",
                 pick.name, pick.passed_over)  # fmt: skip


def run(calls: list[Callable[[], object]]) -> None:
    for call in calls:
        call()


class PartCommits:
    def begin_attempt(self, attempt: int) -> None:
        """A worker group starts ``attempt``: any part of an older one is never combined, and is removed."""
        with self._lock:
            calls = self._decide(self._parts.begin_attempt(attempt))
            self._pacer.begin_attempt(attempt)
        run(calls)
        self._expire_placements()

    def saved(self, attempt: int, name: str) -> Pick | None:
        """The lead host (rank 0's) saved ``name``: the newest pick, which every host stages."""
        with self._lock:
            calls = self._decide(self._parts.expired(time.monotonic()))
            paced(self._pacer.saved(attempt, name, time.monotonic()))
        run(calls)
        return self.pick()

    def pick(self) -> Pick | None:
        """What every host stages: asked by each host while it holds a save it has not staged."""
        with self._lock:
            calls = self._decide(self._parts.expired(time.monotonic()))
            paced(self._pacer.overdue(time.monotonic()))
            pick = self._pacer.current()
        run(calls)
        return pick

    def part_arrived(self, name: str, attempt: int, part: int, parts: int, manifest: dict, holder) -> None:
        with self._lock:
            calls = self._decide(
                self._parts.arrived(name, attempt, parts, Part(part, manifest, holder), time.monotonic())
            )
        run(calls)

    def part_failed(self, name: str, attempt: int, part: int, cause: str) -> None:
        with self._lock:
            calls = self._decide(self._parts.failed(name, attempt, part, cause))
        run(calls)

    def _decide(self, decisions: list[Complete | GivenUp]) -> list[Callable[[], object]]:
        """Under the lock: the state each decision changes, and the calls to make once the lock is released."""
        calls: list[Callable[[], object]] = []
        for d in decisions:
            paced(self._pacer.decided(d.attempt, d.name, time.monotonic()))  # its parts all in, or given up
            refused = self._refused(d.name) if isinstance(d, Complete) else None
            if refused is not None:
                d = GivenUp(d.name, d.attempt, list(d.parts.values()), refused)
            if isinstance(d, GivenUp):
                calls += [lambda d=d, p=p: p.holder.discard.remote(d.name, d.attempt, p.part) for p in d.parts]
                if d.late:  # said when its set was given up: one line per checkpoint, not one per late part
                    continue
                if d.name not in self._complete:
                    self._failures[d.name] = d.reason
                log.warning("checkpoint %s (attempt %d) not published: %s", d.name, d.attempt, d.reason)
                continue
            self._publishing.add(d.name)
            self._placing[d.name] = Placing(d, set(d.parts), time.monotonic())
            # One part: its host publishes it whole, record included, in one rename (never a partial directory).
            whole = commit_record(d) if len(d.parts) == 1 else None
            for p in d.parts.values():
                calls.append(lambda d=d, p=p, w=whole: p.holder.place.remote(d.name, d.attempt, p.part, p.manifest, w))
        return calls

    def _refused(self, name: str) -> str | None:
        if name in self._complete:
            return "already complete (an earlier attempt's checkpoint of this step stands)"
        if name in self._placing:
            return "another attempt's parts of it are being placed"
        return None

    def part_placed(self, name: str, attempt: int, part: int, error: str | None) -> None:
        """A host has placed its part of ``name`` in its root (``error``: it could not)."""
        with self._lock:
            placing = self._placing.get(name)
            if placing is None or placing.complete.attempt != attempt or part not in placing.waiting:
                return
            placing.waiting.discard(part)
            if error is not None:
                placing.errors[part] = error
            if placing.waiting:
                return
        if placing.errors:
            part, error = min(placing.errors.items())
            self._fail_placing(placing, f"part {part} could not be placed: {error}")
            return
        name, record = placing.complete.name, commit_record(placing.complete)
        try:
            self.store.commit(name, record)
        except Exception as exc:
            self._fail_placing(placing, f"its commit record could not be written: {exc}")
            return
        self._committed(placing, record)

    def _committed(self, placing: Placing, record: dict) -> None:
        complete = placing.complete
        now = time.monotonic()
        name, seconds, placed = complete.name, now - complete.first_arrival, now - complete.last_arrival
        with self._lock:
            del self._placing[name]
            self._publishing.discard(name)
            self._complete.add(name)
            self.holds.take(name)  # with complete: no retention, nor the run's end, may come between
            self._failures.pop(name, None)
            self._holders[name] = {r: complete.parts[e["part"]].holder for r, e in record.items()}
            calls = self._decide(self._parts.superseded(int(name))) if name.isdigit() else []
        size = sum(e["size"] for e in record.values()) / 2**20
        log.info(
            "published checkpoint %s to %s: %d parts of attempt %d, %.1f MB, %.3fs after its first part, %.3fs after "
            "its last", name, self.store, len(complete.parts), complete.attempt, size, seconds, placed,
        )  # fmt: skip
        if self.curves is not None and name.isdigit():
            self.curves.log.remote(int(name), {"checkpoint/publish_s": seconds, "checkpoint/mb": size})
        self.holds.announce(name)
        run(calls)
        if name.isdigit():
            self._retain()

    def _fail_placing(self, placing: Placing, reason: str) -> None:
        """Every host has answered (or the deadline passed): what was placed is no checkpoint, and goes."""
        name = placing.complete.name
        with self._lock:
            if self._placing.get(name) is not placing:
                return
            del self._placing[name]
            self._publishing.discard(name)
            self._failures[name] = reason
        for part in placing.complete.parts.values():
            part.holder.delete.remote(name)
        log.error("checkpoint %s (attempt %d) not published: %s", name, placing.complete.attempt, reason)

    def _expire_placements(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [p for p in self._placing.values() if now - p.started > PLACE_DEADLINE_S]
        for placing in late:
            self._fail_placing(placing, f"parts {sorted(placing.waiting)} not placed within {PLACE_DEADLINE_S:.0f} s")

    def publishing(self) -> bool:
        """A publish is under way (a restart asks, and waits with a deadline of its own, before resuming)."""
        self._expire_placements()
        with self._lock:
            return bool(self._publishing)

    def has_parts_elsewhere(self, name: str) -> bool:
        """``name`` was committed here from several hosts' parts (no one host's save holds all of it)."""
        if name not in self._holders:
            return False
        return len({entry.get("part", 0) for entry in self.store.manifest(name).values()}) > 1

    def failures_by_name(self) -> dict[str, str]:
        """Every checkpoint not published (and not published since), with its cause."""
        with self._lock:
            return dict(self._failures)

    def outcome(self, name: str) -> tuple[bool, str | None]:
        """``(decided, why it failed)``: decided once ``name`` is complete or given up (late parts and late
        placements are given up here too, once past their deadlines, since nothing else may come to do it)."""
        self._expire_placements()
        with self._lock:
            calls = self._decide(self._parts.expired(time.monotonic()))
        run(calls)
        with self._lock:
            if name in self._complete:
                return True, None
            pending = name in self._parts.pending_names() or name in self._placing
            return not pending and name in self._failures, self._failures.get(name)
