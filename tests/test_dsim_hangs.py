"""The hang watchdog at up to 512 ranks in a deterministic simulation (``raycluster.dsim.hangs``): the project's own
``ProgressBeacon``, ``Beats`` (the board) and ``Watchdog`` (the verdict, its line, the ranks it ends), driven by a
seeded scheduler with a fake clock; beats late, reordered and repeated; a rank the kernel stopped, a rank stuck in
its data loader while every rank beats, a board that Ray restarts empty, long transfers that move bytes. A failing
seed is printed with the one command that replays it, event for event."""

from __future__ import annotations

import os
import random

import pytest

from raycluster.dsim.hang_profile import LOADER, STOPPED, HangProfile
from raycluster.dsim.hangs import HangWorld
from raycluster.dsim.scheduler import Network
from raycluster.dsim.sweep import sweep

REPLAY = "RAYCLUSTER_DSIM_SEED"


def profile_of(seed: int) -> HangProfile:
    """A seed's run: how many ranks (up to 512 on 64 hosts), the hang timeout, how long a step takes, which fault
    (none, a stopped rank, a rank stuck in its data loader) strikes which rank at which step, how many places the
    waiting ranks' stacks stop in, whether the board is restarted empty mid-run, how messages travel, and for a
    healthy run whether a long download or Hub push moves bytes for three times what its activity allows (at most
    16 ranks: a 45-minute download beats 1,000 times a rank). Runs of 64 ranks and more are kept short (4 steps,
    a timeout of 15 or 60 s), so that 1,000 seeds take about a minute of CPU."""
    rng = random.Random(f"hangs {seed}")
    ranks = rng.choice([2, 16, 64, 512])
    fault = rng.choice(["", STOPPED, LOADER])
    steps = rng.choice([6, 12]) if ranks <= 16 else 4
    transfers = not fault and ranks <= 16
    return HangProfile(
        ranks=ranks,
        timeout_s=rng.choice([15.0, 60.0, 600.0] if ranks <= 16 else [15.0, 60.0]),
        steps=steps,
        step_s=(0.02, rng.choice([0.1, 0.4] if ranks <= 16 else [0.1])),
        save_every=rng.choice([2, 4]),
        fault=fault,
        fault_rank=rng.randrange(ranks),
        fault_step=rng.randint(2, steps),
        board_dies_at_s=rng.uniform(0, 120) if rng.random() < 0.3 else None,
        download=transfers and rng.random() < 0.3,
        hub_push=transfers and rng.random() < 0.3,
        waiting_places=rng.choice([1, 1, 3, 40]),
        network=Network(slow_share=rng.choice([0.0, 0.01, 0.1]), repeat_share=rng.choice([0.0, 0.05])),
    )


@pytest.mark.parametrize("quarter", range(4))
def test_1000_seeds_keep_every_invariant(quarter, tmp_path):
    """In four quarters of 250 seeds, which ``make test-fast`` runs side by side."""
    replay = f"{REPLAY}=<seed> .venv/bin/python -m pytest tests/test_dsim_hangs.py::test_one_seed -s"
    seeds = range(250 * quarter, 250 * (quarter + 1))
    broken = sweep(lambda seed: HangWorld(seed, profile_of(seed), tmp_path).run(), seeds, replay)
    assert not broken, "\n".join(broken)


def test_one_seed(tmp_path):
    """The replay: ``RAYCLUSTER_DSIM_SEED=N`` runs seed N alone and prints what it did, failing or not."""
    seed = int(os.environ.get(REPLAY, "0"))
    profile = profile_of(seed)
    print(f"seed {seed}: {profile}")
    world = HangWorld(seed, profile, tmp_path)
    try:
        world.run()
    finally:
        print(f"{world.sim.events} events; progress stopped at {world.stopped_at}")
        print("\n".join(f"verdict at {at:.1f}s on group {group}: {line}" for at, group, line in world.verdicts))
