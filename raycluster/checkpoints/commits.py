"""Every decision of the commit protocol, in one plain class: the lead host tells of its saves and every host asks
which one to stage (``Pacer``: the same steps on every host), parts arrive from every host's part store
(``PartSet``), a complete set of one attempt is placed by every host at once, and the commit record is written
after the last part is in place. No Ray, no lock, no I/O: the keeper hosts it (``part_commits.py``), and
``raycluster.dsim`` drives the very same class at 64 hosts.
"""

from __future__ import annotations

import logging

from raycluster.checkpoints.effects import (
    Discard,
    Effect,
    Picked,
    Place,
    Placing,
    Published,
    Record,
    Remove,
    Said,
    commit_record,
    placed_files,
)
from raycluster.checkpoints.pacing import Pacer, Pick
from raycluster.checkpoints.parts import PART_DEADLINE_S, Complete, GivenUp, Part, PartSet

PLACE_DEADLINE_S = 300.0
"""How long every host together may take to place a complete set (renames; S3: uploads) before it fails."""


class Commits:
    """Every decision of the commit protocol, in one plain class: no Ray, no lock, no I/O, no clock of its own.
    Each method takes the time and returns the effects to carry out, in order. The keeper hosts it (under its
    lock, carrying the effects out after); ``raycluster.dsim`` drives the very same class at 64 hosts.

    The protocol's call order, once: the lead host's ``saved`` and every host's ``pick`` name the save to stage;
    each host's part store stages it and says ``arrived`` (or ``failed``); once every part of one attempt is in,
    ``Place`` goes to every holder; each says ``placed``; after the last, one ``Record`` is written and
    ``recorded`` makes the checkpoint ``Published``. A placement is failed or committed, never both: once its
    record is being written, no deadline fails it. ``begin_attempt`` gives up everything of older attempts."""

    def __init__(self, part_deadline_s: float = PART_DEADLINE_S, place_deadline_s: float = PLACE_DEADLINE_S):
        self.parts, self.pacer = PartSet(part_deadline_s), Pacer(part_deadline_s)
        self.place_deadline_s = place_deadline_s
        self.placing: dict[str, Placing] = {}
        self.complete: set[str] = set()
        """Every name known complete: committed here, or checked against its record by the keeper."""
        self.failures: dict[str, tuple[int, str]] = {}
        """Every checkpoint not published (and not published since): the attempt it failed in, and the cause. A
        newer attempt's part of the same step clears it, so rank 0 never reads an older attempt's outcome."""
        self.holders: dict[str, dict[str, object]] = {}
        """Committed here from parts: who holds each file (another host's root, on SageMaker)."""

    def begin_attempt(self, attempt: int, now: float) -> list[Effect]:
        """A worker group starts ``attempt``: any part of an older one is never combined, and is removed."""
        effects = self._decide(self.parts.begin_attempt(attempt), now)
        self.pacer.begin_attempt(attempt)
        return effects + self.expire(now)

    def saved(self, attempt: int, name: str, now: float) -> tuple[Pick | None, list[Effect]]:
        """The lead host (rank 0's) saved ``name``: the newest pick, which every host stages."""
        effects = self._expired(now) + self._paced(self.pacer.saved(attempt, name, now))
        return self.pacer.current(), effects + self._paced(self.pacer.overdue(now))

    def pick(self, now: float) -> tuple[Pick | None, list[Effect]]:
        """What every host stages: asked by each host while it holds a save it has not staged."""
        effects = self._expired(now) + self._paced(self.pacer.overdue(now))
        return self.pacer.current(), effects

    def arrived(self, name: str, attempt: int, part: Part, parts: int, now: float) -> list[Effect]:
        if self.failures.get(name, (attempt,))[0] < attempt:  # an older attempt's failure of this step
            del self.failures[name]
        if self.parts.completed_with(name, attempt, part) and not self._waits_for(name, attempt, part.part):
            # Ray ran its stage again after the keeper took its word (the part store died before returning):
            # its place is over, so nothing would ever take this copy out of staging.
            return [Discard(part.holder, name, attempt, part.part)]
        return self._decide(self.parts.arrived(name, attempt, parts, part, now), now)

    def _waits_for(self, name: str, attempt: int, part: int) -> bool:
        placing = self.placing.get(name)
        return placing is not None and placing.complete.attempt == attempt and part in placing.waiting

    def failed(self, name: str, attempt: int, part: int, cause: str, now: float) -> list[Effect]:
        return self._decide(self.parts.failed(name, attempt, part, cause), now)

    def placed(self, name: str, attempt: int, part: int, error: str | None, now: float) -> list[Effect]:
        """A host has placed its part of ``name`` in its root (``error``: it could not)."""
        placing = self.placing.get(name)
        if placing is None or placing.complete.attempt != attempt or part not in placing.waiting:
            return []  # a repeat, or too late: its placement was decided already
        placing.waiting.discard(part)
        if error is not None:
            placing.errors[part] = error
        if placing.waiting:
            return []
        if placing.errors:
            part, error = min(placing.errors.items())
            return self._fail(placing, f"part {part} could not be placed: {error}")
        placing.recording = True
        return [Record(name, attempt, commit_record(placing.complete))]

    def recorded(self, name: str, attempt: int, error: str | None, now: float) -> list[Effect]:
        """The keeper wrote ``name``'s commit record (``error``: it could not): committed, or failed."""
        placing = self.placing.get(name)
        if placing is None or placing.complete.attempt != attempt or not placing.recording:
            return []
        if error is not None:
            return self._fail(placing, f"its commit record could not be written: {error}")
        complete, record = placing.complete, commit_record(placing.complete)
        del self.placing[name]
        self.complete.add(name)
        self.failures.pop(name, None)
        self.holders[name] = {r: complete.parts[e["part"]].holder for r, e in record.items()}
        effects: list[Effect] = [
            Published(name, complete, record, now - complete.first_arrival, now - complete.last_arrival)
        ]
        return effects + (self._decide(self.parts.superseded(int(name)), now) if name.isdigit() else [])

    def expire(self, now: float) -> list[Effect]:
        """Placements past their deadline fail (never one whose record is being written)."""
        late = [p for p in self.placing.values() if not p.recording and now - p.started > self.place_deadline_s]
        effects: list[Effect] = []
        for placing in late:
            reason = f"parts {sorted(placing.waiting)} not placed within {self.place_deadline_s:.0f} s"
            effects += self._fail(placing, reason)
        return effects

    def outcome(self, name: str, now: float) -> tuple[tuple[bool, str | None], list[Effect]]:
        """``(decided, why it failed)``: decided once ``name`` is complete or given up (late parts and late
        placements are given up here too, once past their deadlines, since nothing else may come to do it)."""
        effects = self._expired(now)
        if name in self.complete:
            return (True, None), effects
        pending = name in self.parts.pending_names() or name in self.placing
        failed = self.failures.get(name)
        return (not pending and failed is not None, failed[1] if failed else None), effects

    def _expired(self, now: float) -> list[Effect]:
        """Every deadline, checked at every call that may come when nothing else does (a pick, an outcome)."""
        return self.expire(now) + self._decide(self.parts.expired(now), now)

    def _decide(self, decisions: list[Complete | GivenUp], now: float) -> list[Effect]:
        effects: list[Effect] = []
        for d in decisions:
            effects += self._paced(self.pacer.decided(d.attempt, d.name, now))  # its parts all in, or given up
            refused = self._refused(d.name) if isinstance(d, Complete) else None
            if refused is not None:
                d = GivenUp(d.name, d.attempt, list(d.parts.values()), refused)
            if isinstance(d, GivenUp):
                effects += [Discard(p.holder, d.name, d.attempt, p.part) for p in d.parts]
                if d.late:  # said when its set was given up: one line per checkpoint, not one per late part
                    continue
                self._failed(d.name, d.attempt, d.reason)
                line = f"checkpoint {d.name} (attempt {d.attempt}) not published: {d.reason}"
                effects.append(Said(logging.WARNING, line))
                continue
            self.placing[d.name] = Placing(d, set(d.parts), now)
            # One part: its host publishes it whole, record included, in one rename (never a partial directory).
            whole = commit_record(d) if len(d.parts) == 1 else None
            effects += [Place(p.holder, d.name, d.attempt, p.part, p.manifest, whole) for p in d.parts.values()]
        return effects

    def _failed(self, name: str, attempt: int, reason: str) -> None:
        """``name`` failed in ``attempt`` (never over a newer attempt's word, nor over a complete checkpoint)."""
        if name not in self.complete and self.failures.get(name, (attempt,))[0] <= attempt:
            self.failures[name] = (attempt, reason)

    def another_attempt_stands(self, name: str, attempt: int) -> bool:
        """Another attempt's parts of ``name`` are committed or being placed: a removal of ``attempt``'s part that
        reaches a part store with no word of its place spares them (their files may have the same names). A removed
        attempt is a failed one, so a committed ``name`` is another attempt's."""
        placing = self.placing.get(name)
        return name in self.complete or (placing is not None and placing.complete.attempt != attempt)

    def _refused(self, name: str) -> str | None:
        if name in self.complete:
            return "already complete (an earlier attempt's checkpoint of this step stands)"
        if name in self.placing:
            return "another attempt's parts of it are being placed"
        return None

    def _fail(self, placing: Placing, reason: str) -> list[Effect]:
        """What was placed is no checkpoint, and goes from every host."""
        name, attempt, parts = placing.complete.name, placing.complete.attempt, placing.complete.parts
        del self.placing[name]
        self._failed(name, attempt, reason)
        line = f"checkpoint {name} (attempt {attempt}) not published: {reason}"
        return [
            *(Remove(p.holder, name, attempt, placed_files(p.manifest, len(parts) == 1)) for p in parts.values()),
            Said(logging.ERROR, line),
        ]

    @staticmethod
    def _paced(pick: Pick | None) -> list[Effect]:
        if pick is None:
            return []
        if not pick.passed_over:
            return [Picked(pick)]
        line = (
            f"checkpoint pace: every host stages {pick.name} next, {pick.passed_over} newer save(s) passed over "
            "(a host was still staging)"
        )
        return [Picked(pick), Said(logging.INFO, line)]
