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

    @property
    def holder(self) -> tuple[int, int]:
        return self.index, self.generation
