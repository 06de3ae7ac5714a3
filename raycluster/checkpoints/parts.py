"""Which hosts' parts of which checkpoint have arrived: the bookkeeping of the commit protocol, without Ray.

A checkpoint that every host saves a part of (LeRobot main's sharded saves; one part on LeRobot 0.6.x) is
complete once every part *of one attempt* has arrived: parts are keyed by (name, attempt), and a part of an
older attempt than the newest one seen is never combined with anything (a restarted worker group saves the
same step again). Nothing here waits: each arrival returns what the caller must do now, and sets whose other
parts never come are given up at the next arrival or commit after their deadline, or when a newer step commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

REMEMBERED = 16
"""How many complete sets a part set remembers, so that a part repeated after its set completed is known as a
repeat (and never removed while it is being placed) without remembering every checkpoint of a long run."""
PART_DEADLINE_S = 300.0
"""How long a checkpoint's first part waits for the others (every host stages the same picked step, so they come
within the slowest host's staging time, twice that when it was still staging a pick given up; a set older than
this is given up, never waited on)."""


def remember(table: dict, key, value, limit: int = REMEMBERED) -> None:
    """``table[key] = value`` as its newest entry, the oldest forgotten beyond ``limit``."""
    table.pop(key, None)
    table[key] = value
    while len(table) > limit:
        del table[next(iter(table))]


@dataclass(frozen=True)
class Part:
    part: int
    manifest: dict[str, dict]
    holder: object = None
    """Whoever holds this part's staged files (a PartStore handle; opaque here)."""


@dataclass(frozen=True)
class Complete:
    """Every part of ``name`` from ``attempt`` has arrived: publish them, then write ``manifest`` last."""

    name: str
    attempt: int
    parts: dict[int, Part]
    manifest: dict[str, dict]
    first_arrival: float
    last_arrival: float


@dataclass(frozen=True)
class GivenUp:
    """These parts are never published: remove their staged files; ``reason`` is the checkpoint's cause."""

    name: str
    attempt: int
    parts: list[Part]
    reason: str
    late: bool = False
    """A part of a set given up before (or of a stale attempt): its files go, and nothing more is said of it."""


@dataclass
class _Pending:
    parts_expected: int
    first_arrival: float
    parts: dict[int, Part] = field(default_factory=dict)
    files: dict[str, tuple[int, dict]] = field(default_factory=dict)
    """Every file of the parts arrived so far: the first part that holds it, and its entry (each arrival is
    checked against this, so an arrival costs its own files, not every other part's)."""

    def add(self, part: Part) -> None:
        self.parts[part.part] = part
        for relpath, entry in part.manifest.items():
            self.files.setdefault(relpath, (part.part, entry))


class PartSet:
    def __init__(self, deadline_s: float = PART_DEADLINE_S):
        self.deadline_s = deadline_s
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._failed: dict[tuple[str, int], str] = {}
        self._complete: dict[tuple[str, int], dict[int, Part]] = {}
        self.newest_attempt = 0

    def arrived(self, name: str, attempt: int, parts: int, part: Part, now: float) -> list[Complete | GivenUp]:
        """``part`` of ``parts`` of checkpoint ``name``, saved by ``attempt``."""
        if attempt < self.newest_attempt:  # said once per set: its first part to come after the restart
            key, reason = (name, attempt), f"part {part.part} of attempt {attempt}: stale"
            said = key in self._failed
            if not said:
                remember(self._failed, key, reason)
            return [GivenUp(name, attempt, [part], self._failed[key], late=said)]
        decisions: list[Complete | GivenUp] = [*self.begin_attempt(attempt), *self.expired(now)]
        if (name, attempt) in self._failed:
            return [*decisions, GivenUp(name, attempt, [part], self._failed[(name, attempt)], late=True)]
        if self._repeat(self._complete.get((name, attempt), {}), part):
            return decisions
        pending = self._pending.setdefault((name, attempt), _Pending(parts, now))
        if self._repeat(pending.parts, part):
            return decisions
        reason = self._refusal(pending, parts, part)
        if reason is not None:  # the whole set fails: what it already holds and the refused part
            given_up = self._give_up((name, attempt), reason)
            return [*decisions, GivenUp(name, attempt, [*given_up.parts, part], reason)]
        pending.add(part)
        if len(pending.parts) == parts:
            del self._pending[(name, attempt)]
            remember(self._complete, (name, attempt), dict(pending.parts))
            union = {relpath: entry for p in pending.parts.values() for relpath, entry in p.manifest.items()}
            decisions.append(Complete(name, attempt, dict(pending.parts), union, pending.first_arrival, now))
        return decisions

    def completed_with(self, name: str, attempt: int, part: Part) -> bool:
        """``part`` is the very word of a part of a set that completed (and is still remembered)."""
        return self._repeat(self._complete.get((name, attempt), {}), part)

    @staticmethod
    def _repeat(parts: dict[int, Part], part: Part) -> bool:
        """The same word again (a message delivered twice): nothing new, and nothing to refuse."""
        return parts.get(part.part) == part

    def _refusal(self, pending: _Pending, parts: int, part: Part) -> str | None:
        if parts != pending.parts_expected or not 0 <= part.part < parts:
            return f"part {part.part} of {parts}, but the checkpoint has {pending.parts_expected} parts"
        if part.part in pending.parts:
            return f"part {part.part} arrived twice from one attempt"
        for relpath, entry in part.manifest.items():
            other, held = pending.files.get(relpath, (None, entry))
            if held != entry:
                return f"parts {other} and {part.part} hold different {relpath}"
        return None

    def begin_attempt(self, attempt: int) -> list[GivenUp]:
        """A worker group starts ``attempt``: every set of an older one is given up, and so will be its parts."""
        if attempt <= self.newest_attempt:
            return []
        self.newest_attempt = attempt
        return [self._give_up(key, "abandoned by a restart") for key in self._older_attempts(attempt)]

    def failed(self, name: str, attempt: int, part: int, cause: str) -> list[GivenUp]:
        """``part`` could not be staged: the checkpoint fails, and its parts, here or still to come, are removed."""
        key, reason = (name, attempt), f"part {part} failed: {cause}"
        if attempt < self.newest_attempt:  # a stale attempt's part: nothing of it is wanted anyway (said once)
            said = key in self._failed
            if not said:
                remember(self._failed, key, f"{reason} (attempt {attempt}, abandoned)")
            return [GivenUp(name, attempt, [], self._failed[key], late=said)]
        if key in self._failed or key in self._complete:  # decided already (a failure told twice, say)
            return []
        remember(self._failed, key, reason)
        return [self._give_up(key, reason)] if key in self._pending else [GivenUp(name, attempt, [], reason)]

    def expired(self, now: float) -> list[GivenUp]:
        late = [key for key, p in self._pending.items() if now - p.first_arrival > self.deadline_s]
        return [self._give_up(key, self._missing(key, f"within {self.deadline_s:.0f} s")) for key in late]

    def superseded(self, step: int) -> list[GivenUp]:
        """A newer checkpoint is complete: older sets whose other parts have not come are given up."""
        older = [key for key in self._pending if key[0].isdigit() and int(key[0]) < step]
        return [self._give_up(key, self._missing(key, f"before checkpoint {step} was complete")) for key in older]

    def pending_names(self) -> set[str]:
        return {name for name, _ in self._pending}

    def _older_attempts(self, attempt: int) -> list[tuple[str, int]]:
        return [key for key in self._pending if key[1] < attempt]

    def _missing(self, key: tuple[str, int], when: str) -> str:
        pending = self._pending[key]
        missing = sorted(set(range(pending.parts_expected)) - pending.parts.keys())
        return f"parts {missing} of {pending.parts_expected} never arrived {when}"

    def _give_up(self, key: tuple[str, int], reason: str) -> GivenUp:
        """Its parts go, and so will any that come late (a set given up is never reopened)."""
        remember(self._failed, key, reason)
        pending = self._pending.pop(key)
        return GivenUp(key[0], key[1], list(pending.parts.values()), reason)
