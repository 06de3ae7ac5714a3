"""Retention, evaluation holds and fetches in a deterministic simulation (``raycluster.dsim.retention``): the
project's own ``Retention``, ``Holds`` and ``EvalBook``, driven by a seeded scheduler with a fake clock, with
announcements lost, late or repeated, evaluations that wait for capacity or take many save intervals, fetches
that die or stall past their lease; every invariant after every event. A failing seed is printed with the one
command that replays it."""

from __future__ import annotations

import os
import random

from raycluster.dsim.retention import RetentionProfile, RetentionWorld
from raycluster.dsim.scheduler import Network
from raycluster.dsim.sweep import sweep

REPLAY = "RAYCLUSTER_DSIM_SEED"


def profile_of(seed: int) -> RetentionProfile:
    """A seed's run: how many checkpoints stay, how long a read lease lasts, how messages travel, how many
    announcements are lost, how long evaluations take and how many fail, how long a deletion takes, and how
    fetches read (some stall past their lease)."""
    rng = random.Random(f"retention {seed}")
    lease = rng.choice([5.0, 30.0, 300.0])
    gap_high = rng.choice([1.0, 5.0, 2 * lease])  # the last: a fetch may stall past its lease
    return RetentionProfile(
        saves=rng.choice([1, 3, 30]), keep=rng.choice([1, 2, 5]), read_lease_s=lease,
        evaluation_s=(0.5, rng.choice([5.0, 40.0])), slow_evaluations=rng.choice([0.0, 0.1, 0.5]),
        eval_slots=rng.choice([1, 2, 8]),
        failing_evaluations=rng.choice([0.0, 0.2]), lost_announcements=rng.choice([0.0, 0.05, 0.5]),
        stopped=rng.random() < 0.3,
        delete_s=(0.01, rng.choice([0.1, 5.0, 60.0])), fetches=rng.choice([0, 4, 20]),
        chunk_gap_s=(0.05, gap_high), dying_fetches=rng.choice([0.0, 0.2, 0.8]),
        network=Network(slow_share=rng.choice([0.0, 0.1]), repeat_share=rng.choice([0.0, 0.05])),
    )  # fmt: skip


def test_1000_seeds_keep_every_invariant():
    replay = f"{REPLAY}=<seed> .venv/bin/python -m pytest tests/test_dsim_retention.py::test_one_seed -s"
    broken = sweep(lambda seed: RetentionWorld(seed, profile_of(seed)).run(), range(1000), replay)
    assert not broken, "\n".join(broken)


def test_one_seed():
    """The replay: ``RAYCLUSTER_DSIM_SEED=N`` runs seed N alone and prints what it did, failing or not."""
    seed = int(os.environ.get(REPLAY, "0"))
    profile = profile_of(seed)
    print(f"seed {seed}: {profile}")
    world = RetentionWorld(seed, profile)
    try:
        world.run()
    finally:
        print(f"{world.sim.events} events; deleted {world.deleted}; complete {world.complete}")
        print(f"best {world.evals.book.best}; held {world.holds.names()}; fetches {len(world.fetches)}")
        print(f"outcomes {[(n, r.status) for n, r in sorted(world.evals.book.records.items())]}")
