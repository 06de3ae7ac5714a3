"""One simulated host: its shipping queue, its staging directory, its checkpoint root, and its part store's
knowledge of what lies there."""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.checkpoints.pacing import ShipQueue
from raycluster.checkpoints.placements import Placements


@dataclass
class Host:
    index: int
    queue: ShipQueue
    alive: bool = True
    staged: set[tuple[str, int]] = field(default_factory=set)
    """(name, attempt) of every part this host staged, in any attempt."""
    staging: set[tuple[str, int]] = field(default_factory=set)
    """(name, attempt) of the parts in its staging directory now (staged, neither placed nor discarded)."""
    root: dict[str, int] = field(default_factory=dict)
    """Its checkpoint root: name -> the attempt whose part of it lies there."""
    placements: Placements = field(default_factory=Placements)
    """Which late places and removals its part store still takes: the very class the part store holds."""
    generation: int = 0
    """Which host holds this place: a replaced one is a new part store (a call to the old one goes nowhere)."""
    store_up: bool = True
    """Its part store's process is running (it dies and Ray starts it again on the same host: the same holder)."""
    store_epoch: int = 0
    """How many times its part store's process died: a call begun before a death was cut off by it."""
    deferred: list = field(default_factory=list)
    """Calls that came while its part store was down: Ray takes them to the store started again (task retries)."""
    in_flight: list = field(default_factory=list)
    """The places its part store is carrying out now (waiting for their turn, writing, or saying so)."""
    writing: list = field(default_factory=list)
    """Of those, the ones writing into its root now (their turn taken, their checks passed)."""
    turns: dict = field(default_factory=dict)
    """Checkpoint name -> the calls waiting for its turn, while a place or removal of it holds it (``turns.py``)."""
    lost: set[tuple[str, int]] = field(default_factory=set)
    """(name, attempt) of the parts staged here before its part store's latest death: the store started again holds
    no staged copy of them and no memory of their placements, and answers a place of one with an error."""

    @property
    def holder(self) -> tuple[int, int]:
        return self.index, self.generation
