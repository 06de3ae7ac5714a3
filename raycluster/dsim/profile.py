"""What a simulated checkpoint run looks like (``Profile``: hosts, saves, slow hosts, the network, faults), and
the yardstick it is measured against: the most commits any protocol could make."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from raycluster.dsim.scheduler import Network

INTERVAL_S = 60.0
"""Seconds between two saves (only ratios to it matter)."""


@dataclass(frozen=True)
class Profile:
    """A run's shape: ``hosts``, ``saves`` per attempt, which hosts stage slowly (``slow``: host -> its staging
    time in save intervals; every other host takes ``fast``), the network, and a host that dies (``death``:
    (host, after how many intervals))."""

    hosts: int
    saves: int
    slow: dict[int, float] = field(default_factory=dict)
    fast: float = 0.3
    network: Network = Network()
    death: tuple[int, float] | None = None
    restart_s: float = 90.0
    stage_failures: float = 0.0
    """The share of stagings that fail (a full disk, a part store that died mid-stage): the keeper is told."""
    place_s: tuple[float, float] = (0.5, 5.0)
    """How long a host takes to place its part into its root (renames; S3: uploads)."""
    record_s: tuple[float, float] = (0.01, 2.0)
    """How long the keeper takes to write a commit record (a keeper busy for minutes: longer than a deadline)."""
    late_places: float = 0.0
    """The share of places that outlast the placement deadline (a stalled disk or upload) and still end, late."""
    store_deaths: int = 0
    """How many times, at seeded moments, a host's part store process dies (the host lives) and Ray starts it again
    after ``store_restart_s``: its staging and its memory of placements are gone, its root is intact, and the calls
    cut off or sent meanwhile reach the store started again."""
    store_restart_s: tuple[float, float] = (2.0, 30.0)


def ideal_commits(saves: int, slowest: float) -> int:
    """The most any protocol commits: the slowest host stages the newest save each time it is free."""
    commits, last, now = 0, 0, INTERVAL_S
    while last < saves:
        newest = min(saves, int(now // INTERVAL_S))
        if newest <= last:  # nothing new since its last: it waits for the next save
            now = (last + 1) * INTERVAL_S
            continue
        last, now, commits = newest, now + slowest * INTERVAL_S, commits + 1
    return commits


def slow_hosts(hosts: int, count: int, low: float = 1.05, high: float = 1.5, seed: str = "slow") -> dict[int, float]:
    """``count`` of ``hosts`` hosts, chosen by ``seed``, staging at ``low``-``high`` save intervals."""
    rng = random.Random(f"{seed} {hosts} {count}")
    return {host: rng.uniform(low, high) for host in rng.sample(range(hosts), count)}
