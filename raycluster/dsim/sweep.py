"""Many seeds of one simulation, and what broke: the part every simulation's tests share."""

from __future__ import annotations

import time
from collections.abc import Callable


class InvariantBroken(AssertionError):
    """What a simulation raises when something that must hold does not."""


def sweep(run: Callable[[int], object], seeds: range, replay: str) -> list[str]:
    """``run`` for every seed (it raises ``InvariantBroken`` on a broken invariant): each seed that broke one, as
    "seed N: what broke" (at most 10, then the command that replays one); the seconds it took are printed."""
    started, broken = time.monotonic(), []
    for seed in seeds:
        try:
            run(seed)
        except InvariantBroken as exc:
            broken.append(f"seed {seed}: {exc}")
    print(f"seeds {seeds.start}-{seeds.stop - 1}: {time.monotonic() - started:.1f}s")
    return [*broken[:10], f"replay one: {replay}"] if broken else []
