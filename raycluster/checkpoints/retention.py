"""Which checkpoints retention deletes, and when: decided here, carried out by the keeper.

The newest ``keep`` complete checkpoints stay. An older one stays too while anyone still uses it: a hold (its
evaluation's, or the best model's), its own publish, or a fetch. A fetch holds its checkpoint by a read lease: each
chunk it reads renews the lease, and a fetch that has read nothing for ``read_lease_s`` has lost its worker, so it
holds nothing any more. A plain class over a clock its caller passes in: the keeper hosts it under its lock, and
the simulation in ``raycluster/dsim/retention.py`` drives the very same class with a fake clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count


@dataclass
class Retention:
    keep: int
    """How many of the newest complete checkpoints stay; below 1, retention is off."""
    read_lease_s: float
    readers: defaultdict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    """The leases of the fetches under way, by checkpoint (a resume's answer holds one until its checkpoint is
    deleted). Each by its number, so that a fetch's end said twice, or late, ends that fetch alone."""
    read_at: dict[str, float] = field(default_factory=dict)
    """When each checkpoint a fetch holds was last read."""
    deleting: set[str] = field(default_factory=set)
    """Checkpoints whose deletion has begun: no fetch may start on them."""
    _numbers: count = field(default_factory=count)

    def due(self, complete: list[str], in_use: Callable[[str], bool], now: float) -> tuple[list[str], list[str]]:
        """Of ``complete`` (oldest first), the checkpoints beyond the newest ``keep`` that go now, each marked as
        being deleted (its fetches forgotten), and those a fetch within its lease spares until a later save.
        ``in_use``: held, or being published anew."""
        go, fetched = [], []
        for name in complete[: -self.keep] if self.keep >= 1 else []:
            if in_use(name) or name in self.deleting:  # another save's retention is deleting it already
                continue
            if self.readers.get(name) and now - self.read_at[name] < self.read_lease_s:
                fetched.append(name)
                continue
            self.deleting.add(name)
            self.readers.pop(name, None)
            self.read_at.pop(name, None)
            go.append(name)
        return go, fetched

    def deleted(self, name: str) -> None:
        self.deleting.discard(name)

    def lease(self, name: str, now: float) -> int | None:
        """A fetch of ``name`` begins (held until ``fetch_ends`` with the number returned), or a resume answers
        ``name`` (held for one lease, never ended, so that the fetches that follow find it); None, and nothing
        held, when its deletion has begun."""
        if name in self.deleting:
            return None
        number = next(self._numbers)
        self.readers[name].add(number)
        self.read_at[name] = now
        return number

    def read(self, name: str, now: float) -> None:
        """A fetch read a chunk of ``name``: its lease is renewed (a checkpoint deleted meanwhile is not recalled)."""
        if name in self.readers:
            self.read_at[name] = now

    def fetch_ends(self, name: str, lease: int) -> bool:
        """Lease number ``lease`` of ``name`` ends (said again, or after the checkpoint's deletion: nothing more).
        True when no fetch holds ``name`` any more."""
        held = self.readers.get(name)
        if held is None:  # deleted meanwhile: its lease had run out
            return True
        held.discard(lease)
        if not held:
            del self.readers[name]
            self.read_at.pop(name, None)
        return not held

    def forget(self, name: str) -> None:
        """``name`` is no checkpoint any more (moved aside as broken): nothing of it is kept here."""
        self.readers.pop(name, None)
        self.read_at.pop(name, None)
