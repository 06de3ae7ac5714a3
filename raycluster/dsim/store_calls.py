"""A part store's place and removal as the checkpoint simulation's hosts carry them out, in the part store's own
order (``raycluster/checkpoints/part_store.py``): each waits for its checkpoint's turn (``turns.py``); a place
checks (``Placements.may_place``, its staged copy), writes for its time, and takes back what it wrote if its
removal came meanwhile (``Placements.written``); a removal marks its attempt given up before it waits
(``Placements.give_up``). The place's word to the keeper is the world's (``placed``)."""

from __future__ import annotations

from collections.abc import Callable

from raycluster.checkpoints.effects import Discard, Place, Remove
from raycluster.checkpoints.placements import NO_STAGED_COPY, TAKEN_BACK
from raycluster.dsim.host import Host
from raycluster.dsim.scheduler import Scheduler
from raycluster.dsim.sweep import InvariantBroken
from raycluster.dsim.turns import Turns, Waiting


class StoreCalls:
    def __init__(
        self,
        sim: Scheduler,
        turns: Turns,
        placed: Callable[[Host, Place, int, str | None], None],
        stands: Callable[[str, int], bool],
    ):
        self.sim, self.turns, self.placed = sim, turns, placed
        self.stands = stands
        """The keeper's word to a removal with no word of its place: another attempt's part of it stands."""
        self.removals_gave_up = 0
        """How many removals gave up waiting for their turn (the case the places' taking back exists for)."""

    def placing(self, host: Host, place: Place, took: float) -> None:
        """A place reaching its part store: it waits for its checkpoint's turn (``turns.py``), then ``_place``."""
        epoch = host.store_epoch
        host.in_flight.append(place)
        waited = f"TimeoutError: another stage, place or removal of checkpoint {place.name} took too long"

        def gave_up() -> None:  # as any place that fails: its staged copy goes, the keeper is told
            host.staging.discard((place.name, place.attempt))
            self.placed(host, place, epoch, waited)

        run = Waiting(lambda: self._place(host, place, epoch, took), again=None, gave_up=gave_up)
        self.turns.take(host, place.name, run)  # a death takes a place on by other means (``StoreProcesses.dies``)

    def _place(self, host: Host, place: Place, epoch: int, took: float) -> None:
        """Its turn has come: checked as the part store checks, then written for ``took`` (``_written``)."""
        if not host.alive or host.holder != place.holder or host.store_epoch != epoch:
            return  # a dead part store never answers (the deadline decides); a death took it to the new one
        key = (place.name, place.attempt)
        refused = host.placements.may_place(*key)
        if refused is None and key in host.lost and key not in host.staging:
            host.placements.give_up(*key)
            refused = NO_STAGED_COPY
        if refused is not None:  # as the part store does: nothing written, its staged copy gone, the keeper told
            host.staging.discard(key)
            self.turns.release(host, place.name)
            self.placed(host, place, epoch, f"not placed: {refused}")
            return
        if key not in host.staging:
            raise InvariantBroken(f"host {host.index} asked to place {key}, which it does not hold staged")
        host.placements.placing(place.name, place.attempt, [])
        host.writing.append(place)
        self.sim.at(took, lambda: self._written(host, place, epoch))

    def _written(self, host: Host, place: Place, epoch: int) -> None:
        """Its write ended: what it wrote stays, unless its removal came meanwhile (``Placements.written``)."""
        if not host.alive or host.holder != place.holder or host.store_epoch != epoch:
            return
        host.writing.remove(place)
        host.staging.discard((place.name, place.attempt))
        host.root[place.name] = place.attempt
        taken = host.placements.written(place.name, place.attempt)
        if taken is not None:
            host.root.pop(place.name)
            host.placements.taken_back(place.name, place.attempt)
        self.turns.release(host, place.name)
        self.placed(host, place, epoch, None if taken is None else f"not placed: {TAKEN_BACK}")

    def remove(self, host: Host, remove: Remove) -> None:
        """As the part store's ``delete``: its attempt given up first, then its turn, then what goes (a removal that
        gives up waiting leaves the place holding the turn to take back what it writes)."""
        host.placements.give_up(remove.name, remove.attempt)
        run, again = lambda: self._removed(host, remove), lambda: self.remove(host, remove)
        self.turns.take(host, remove.name, Waiting(run, again, gave_up=self._removal_gave_up))

    def _removal_gave_up(self) -> None:
        self.removals_gave_up += 1

    def _removed(self, host: Host, remove: Remove) -> None:
        removal = host.placements.removal(remove.name, remove.attempt, remove.files)
        if removal is not None and not (removal.unheard and self.stands(remove.name, remove.attempt)):
            host.root.pop(remove.name, None)
        self.turns.release(host, remove.name)

    def discard(self, host: Host, discard: Discard) -> None:
        host.staging.discard((discard.name, discard.attempt))
