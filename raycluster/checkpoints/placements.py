"""What one host's root holds of each checkpoint, and which late words may still change it.

A part store runs several calls at once, and a placement that outlasts its deadline still ends: a place or a
removal of one attempt's part may come after the keeper has given that attempt up and a newer attempt has put
its own part of the same step in place. Neither may touch the newer part (the committed checkpoint would then
fail its checksums), and a place that comes after its own removal must leave nothing behind. No Ray, no lock,
no I/O: the part store holds one, and calls it under a lock per checkpoint name.
"""

from __future__ import annotations

from raycluster.checkpoints.parts import remember


class Placements:
    def __init__(self) -> None:
        self._placed: dict[str, int] = {}
        """Which attempt's part of each recent checkpoint lies in this root."""
        self._given_up: dict[tuple[str, int], bool] = {}
        """(name, attempt) parts the keeper has said to remove: a place of one that comes later is refused."""

    def may_place(self, name: str, attempt: int) -> str | None:
        """Why ``attempt``'s part of ``name`` must not be placed now, or None if it may."""
        if (name, attempt) in self._given_up:
            return f"attempt {attempt}'s part was given up before it could be placed"
        newer = self._placed.get(name, attempt)
        if newer > attempt:
            return f"attempt {newer}'s part of it is in place already"
        return None

    def placed(self, name: str, attempt: int) -> None:
        remember(self._placed, name, attempt)

    def may_remove(self, name: str, attempt: int | None) -> bool:
        """Whether this root's files of ``name`` go: every attempt's (retention: ``attempt`` None), or a failed
        placement's, unless another attempt's part lies there. A root this part store knows nothing of (it
        restarted) takes the keeper's word."""
        if attempt is not None:
            remember(self._given_up, (name, attempt), True)
            if self._placed.get(name, attempt) != attempt:
                return False
        self._placed.pop(name, None)
        return True
