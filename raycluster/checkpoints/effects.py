"""What the commit protocol asks to be done, as data: ``Commits`` decides, and whoever hosts it carries these out
(the keeper with Ray calls and its store, ``raycluster.dsim`` with simulated hosts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.checkpoints.manifest import MANIFEST
from raycluster.checkpoints.pacing import Pick
from raycluster.checkpoints.parts import Complete


def commit_record(complete: Complete) -> dict[str, dict]:
    """Every file of every part: its size and SHA-256, and the part and attempt it came from."""
    return {
        relpath: {**entry, "part": part.part, "attempt": complete.attempt}
        for part in complete.parts.values()
        for relpath, entry in part.manifest.items()
    }


def placed_files(manifest: dict[str, dict], whole: bool) -> tuple[str, ...]:
    """What a part's place writes into its host's root: its files, and the commit record with them when it is the
    checkpoint's only part (``whole``)."""
    return (*manifest, *([MANIFEST] if whole else []))


@dataclass
class Placing:
    """A complete set being placed: the name stays taken until every host has answered, or the deadline."""

    complete: Complete
    waiting: set[int]
    started: float
    errors: dict[int, str] = field(default_factory=dict)
    recording: bool = False
    """Every part is placed and the record is being written: only the record's outcome decides it now."""


@dataclass(frozen=True)
class Place:
    """Ask ``holder`` to place its part of ``name`` into its root (``whole``: the only part, with its record)."""

    holder: object
    name: str
    attempt: int
    part: int
    manifest: dict[str, dict]
    whole: dict | None


@dataclass(frozen=True)
class Discard:
    """Ask ``holder`` to remove its staged part of ``name`` from ``attempt``: it is never published."""

    holder: object
    name: str
    attempt: int
    part: int


@dataclass(frozen=True)
class Remove:
    """Ask ``holder`` to remove what it placed of ``name`` in ``attempt``: the placement failed, so it is no
    checkpoint (a newer attempt's part of the same step, placed there since, stays: this word may come late)."""

    holder: object
    name: str
    attempt: int
    files: tuple[str, ...]
    """The files that part's place writes: on a root every host shares, a part store with no word of that place
    (it has not come yet, or came to the process before Ray started it again) takes these, no other host's."""


@dataclass(frozen=True)
class Record:
    """Write ``name``'s commit record into the keeper's root, then say how it went (``Commits.recorded``)."""

    name: str
    attempt: int
    record: dict[str, dict]


@dataclass(frozen=True)
class Published:
    """``name`` is complete: its record is written (``seconds`` after its first part, ``placed`` after its last)."""

    name: str
    complete: Complete
    record: dict[str, dict]
    seconds: float
    placed: float


@dataclass(frozen=True)
class Picked:
    """A new pick: every host stages it (each learns it at its next ask; the simulation delivers it so)."""

    pick: Pick


@dataclass(frozen=True)
class Said:
    """One line for the log, at ``level``."""

    level: int
    line: str


Effect = Place | Discard | Remove | Record | Published | Picked | Said
