"""The keeper's side of the commit protocol: parts arrive from every host's part store, a complete set of one
attempt is placed by every host at once, and the commit record is written after the last part is in place.

Each method returns at once; the hosts call back (``part_arrived``, ``part_placed``), so no thread of the keeper
waits for another host, whatever their number. Mixed into ``CheckpointKeeper``, whose state it shares.
"""

from __future__ import annotations

import logging
import time

from raycluster.checkpoints.parts import Complete, GivenUp, Part

log = logging.getLogger(__name__)


class PartCommits:
    def begin_attempt(self, attempt: int) -> None:
        """A worker group starts ``attempt``: any part of an older one is never combined, and is removed."""
        with self._lock:
            decisions = self._parts.begin_attempt(attempt)
        self._act(decisions)

    def part_arrived(self, name: str, attempt: int, part: int, parts: int, manifest: dict, holder) -> None:
        with self._lock:
            decisions = self._parts.arrived(name, attempt, parts, Part(part, manifest, holder), time.time())
        self._act(decisions)

    def part_failed(self, name: str, attempt: int, part: int, cause: str) -> None:
        with self._lock:
            decisions = self._parts.failed(name, attempt, part, cause)
        self._act(decisions)

    def _act(self, decisions: list[Complete | GivenUp]) -> None:
        for decision in decisions:
            if isinstance(decision, GivenUp):
                self._give_up(decision)
                continue
            with self._lock:
                refused = self._refused(decision.name)
                if refused is None:
                    self._publishing.add(decision.name)
                    self._placing[decision.name] = (decision, set(decision.parts))
            if refused is not None:
                self._give_up(GivenUp(decision.name, decision.attempt, list(decision.parts.values()), refused))
                continue
            for part in decision.parts.values():
                part.holder.place.remote(decision.name, decision.attempt, part.part, part.manifest)

    def _refused(self, name: str) -> str | None:
        if name in self._complete:
            return "already complete (an earlier attempt's checkpoint of this step stands)"
        if name in self._placing:
            return "another attempt's parts of it are being placed"
        return None

    def _give_up(self, given_up: GivenUp) -> None:
        for part in given_up.parts:
            part.holder.discard.remote(given_up.name, given_up.attempt, part.part)
        with self._lock:
            if given_up.name not in self._complete:
                self._failures[given_up.name] = given_up.reason
        log.warning("checkpoint %s (attempt %d) not published: %s", given_up.name, given_up.attempt, given_up.reason)

    def part_placed(self, name: str, attempt: int, part: int, error: str | None) -> None:
        """A host has placed its part of ``name`` in its root (``error``: it could not)."""
        with self._lock:
            placing = self._placing.get(name)
            if placing is None or placing[0].attempt != attempt:
                return
            complete, waiting = placing
            if error is None:
                waiting.discard(part)
                if waiting:
                    return
            del self._placing[name]
        try:
            if error is not None:
                raise RuntimeError(f"part {part} could not be placed: {error}")
            self._commit_parts(complete)
        except Exception as exc:
            with self._lock:
                self._failures[name] = str(exc)
            for part in complete.parts.values():
                part.holder.delete.remote(name)  # placed but never committed: no one may take it for a checkpoint
            log.error("checkpoint %s (attempt %d) not published: %s", name, attempt, exc)
        finally:
            with self._lock:
                self._publishing.discard(name)

    def _commit_parts(self, complete: Complete) -> None:
        name = complete.name
        record = {
            relpath: {**entry, "part": part.part, "attempt": complete.attempt}
            for part in complete.parts.values()
            for relpath, entry in part.manifest.items()
        }
        self.store.commit(name, record)
        seconds, size = time.time() - complete.first_arrival, sum(e["size"] for e in record.values())
        with self._lock:
            self._complete.add(name)
            self._failures.pop(name, None)
            self._holders[name] = {r: complete.parts[e["part"]].holder for r, e in record.items()}
            superseded = self._parts.superseded(int(name)) if name.isdigit() else []
        log.info(
            "published checkpoint %s to %s: %d parts of attempt %d, %.1f MB, %.2fs after its first part",
            name, self.store, len(complete.parts), complete.attempt, size / 2**20, seconds,
        )  # fmt: skip
        if self.curves is not None and name.isdigit():
            self.curves.log.remote(int(name), {"checkpoint/publish_s": seconds, "checkpoint/mb": size / 2**20})
        self._act(superseded)
        if name.isdigit():
            self._retain()

    def has_parts_elsewhere(self, name: str) -> bool:
        """``name`` was committed here from several hosts' parts (no one host's save holds all of it)."""
        if name not in self._holders:
            return False
        record = self.store.manifest(name)
        return len({entry.get("part", 0) for entry in record.values()}) > 1

    def failures_by_name(self) -> dict[str, str]:
        """Every checkpoint not published (and not published since), with its cause."""
        with self._lock:
            return dict(self._failures)

    def outcome(self, name: str) -> tuple[bool, str | None]:
        """``(decided, why it failed)``: decided once ``name`` is complete or given up (late parts are given up
        here too, once past their deadline, since nothing else may come to do it)."""
        with self._lock:
            decisions = self._parts.expired(time.time())
        self._act(decisions)
        with self._lock:
            if name in self._complete:
                return True, None
            pending = name in self._parts.pending_names() or name in self._placing
            return not pending and name in self._failures, self._failures.get(name)
