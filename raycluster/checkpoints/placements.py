"""What one host's root holds of each checkpoint, and which late words may still change it.

A part store runs several calls at once, and a placement that outlasts its deadline still ends: a place or a
removal of one attempt's part may come after the keeper has given that attempt up and a newer attempt has put
its own part of the same step in place. Neither may touch the newer part (the committed checkpoint would then
fail its checksums), and a place that comes after its own removal must leave nothing behind. On a root every
host shares (S3) a failed placement's removal takes this host's own files of it, never another host's.

A removal may wait long for its turn behind a place of the same part (a place late enough to be failed for it
is one that takes long), past its own deadline for that wait. So it marks its attempt given up before it waits
(``give_up``), and the place, once its write has ended (whole or not), takes back what it wrote (``written``,
``taken_back``): the part goes whichever of the two ends first, and a removal that gave up waiting loses
nothing. No Ray, no I/O; a lock of its own, since a removal's mark comes from another thread than the place it
concerns.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from raycluster.checkpoints.parts import remember

NO_STAGED_COPY = "this part store holds no staged copy of it (started again since it staged it)"
"""Why a place that Ray took to a part store started again writes nothing: the part died with the old process
(the part store says it, and the simulation's hosts say the same)."""
TAKEN_BACK = "its removal came while it was being written: what it wrote was taken back"
REMEMBERED_NAMES = 4096
"""Checkpoints a part store remembers (a save every 5 minutes for a fortnight): bounded, and far more than a late
word ever lags behind."""


@dataclass(frozen=True)
class Removal:
    files: tuple[str, ...] | None
    """This host's files of a failed placement; None: every file of the checkpoint (retention)."""
    unheard: bool = False
    """This part store has no word of that place (it has not come yet, or came before Ray started the store
    again): the files are the ones the keeper says it writes, and another attempt's part there is spared."""


class Placements:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._placed: dict[str, tuple[int, tuple[str, ...]]] = {}
        """Which attempt's part of each recent checkpoint this host put in its root, and its files."""
        self._given_up: dict[tuple[str, int], bool] = {}
        """(name, attempt) parts the keeper has said to remove, or whose place found no staged copy: a place or a
        stage of one that comes later is refused."""

    def may_place(self, name: str, attempt: int) -> str | None:
        """Why ``attempt``'s part of ``name`` must not be placed now, or None if it may."""
        with self._lock:
            if (name, attempt) in self._given_up:
                return f"attempt {attempt}'s part was given up before it could be placed"
            newer = self._placed.get(name, (attempt,))[0]
            if newer > attempt:
                return f"attempt {newer}'s part of it is in place already"
            return None

    def give_up(self, name: str, attempt: int) -> None:
        """A place or a stage of ``attempt``'s part of ``name`` that comes later is refused; one being written now
        takes back what it wrote once it ends (``written``). Said by a removal, and by a place that found no staged
        copy (the part died with an earlier process, so the keeper fails that checkpoint: a stage of it that Ray
        runs again on this process later must stage nothing)."""
        with self._lock:
            remember(self._given_up, (name, attempt), True, REMEMBERED_NAMES)

    def placing(self, name: str, attempt: int, files: list[str]) -> None:
        """Said before the write begins: a removal after a write that failed halfway takes what it left."""
        with self._lock:
            remember(self._placed, name, (attempt, tuple(files)), REMEMBERED_NAMES)

    def written(self, name: str, attempt: int) -> Removal | None:
        """The write of ``attempt``'s part of ``name`` has ended, whole or not: what of it to take back at once,
        if a removal marked it given up meanwhile (None: it stays). Said ``taken_back`` once those files are gone."""
        with self._lock:
            placed = self._placed.get(name)
            if (name, attempt) not in self._given_up or placed is None or placed[0] != attempt:
                return None
            return Removal(placed[1])

    def taken_back(self, name: str, attempt: int) -> None:
        """A place took back what it wrote: nothing of it lies here now, so its removal, when its turn comes, takes
        only this host's files of it (none), never, on a root every host shares, every host's files of that name.
        Until then (a take-back that failed) the removal still knows which files to take."""
        with self._lock:
            remember(self._placed, name, (attempt, ()), REMEMBERED_NAMES)

    def removal(self, name: str, attempt: int | None, files: tuple[str, ...] = ()) -> Removal | None:
        """What of ``name`` goes from this root: every attempt's (retention: ``attempt`` None), or a failed
        placement's (``files``: what the keeper says its place writes), unless another attempt's part lies there
        (None: nothing)."""
        with self._lock:
            if attempt is None:
                self._placed.pop(name, None)
                return Removal(None)
            self.give_up(name, attempt)
            placed = self._placed.get(name)
            if placed is None:
                return Removal(tuple(files), unheard=True)
            if placed[0] != attempt:
                return None
            del self._placed[name]
            return Removal(placed[1])
