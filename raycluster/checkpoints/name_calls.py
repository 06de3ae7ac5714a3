"""One call at a time per checkpoint name in a part store, with a deadline on the wait for a turn."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Turn:
    """One checkpoint's lock, and how many calls hold it or wait for it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: int = 0


class NameCalls:
    """One stage, place or removal of a checkpoint at a time (a late one then sees what the other did), calls for
    other checkpoints beside it; a call that waits longer than ``timeout_s`` for its turn fails, so a place stalled
    on its disk or upload holds one thread, not every thread that comes to wait behind it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._turns: dict[str, Turn] = {}
        """name -> its turn; gone when no call holds or waits for it."""

    @contextmanager
    def one_at_a_time(self, name: str, timeout_s: float) -> Iterator[None]:
        with self._guard:
            turn = self._turns.setdefault(name, Turn())
            turn.calls += 1
        try:
            if not turn.lock.acquire(timeout=timeout_s):
                raise TimeoutError(
                    f"another stage, place or removal of checkpoint {name} took longer than {timeout_s:.0f} s"
                )
            try:
                yield
            finally:
                turn.lock.release()
        finally:
            with self._guard:
                turn.calls -= 1
                if turn.calls == 0:
                    del self._turns[name]
