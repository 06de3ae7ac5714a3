"""The checkpoint commit protocol at 64 hosts in a deterministic simulation (``raycluster.dsim``): the project's own
``Commits`` (the keeper's every decision) and ``ShipQueue`` (each host's), driven by a seeded scheduler with a fake
clock, with faults at every message; every invariant of ``World.check`` after every event. A failing seed is printed
with the one command that replays it, event for event."""

from __future__ import annotations

import os
import random

import pytest

from raycluster.dsim.checkpoints import World, paced_commits
from raycluster.dsim.profile import Profile, slow_hosts
from raycluster.dsim.scheduler import Network
from raycluster.dsim.sweep import sweep as seeds_broken

HOSTS = 64
REPLAY = "RAYCLUSTER_DSIM_SEED"


def profile_of(seed: int) -> Profile:
    """A seed's run: which hosts stage slower than the save interval and by how much (none, some, or all; up to 2.4
    intervals, which the part deadline of 5 intervals covers twice over: a host may finish staging a pick that was
    given up before it starts the next), how messages travel (late and reordered, repeated), whether stagings fail,
    whether the keeper is busy for minutes writing a record, whether places end after their deadline, whether
    a host dies mid-run, and whether part store processes die alone (Ray starts them again)."""
    rng = random.Random(f"profile {seed}")
    slow_hosts = rng.sample(range(HOSTS), rng.choice([0, 1, 8, rng.randrange(HOSTS), HOSTS]))
    network = Network(slow_share=rng.choice([0.0, 0.01, 0.1]), repeat_share=rng.choice([0.0, 0.02]))
    death = (rng.randrange(HOSTS), rng.uniform(0.5, 8)) if rng.random() < 0.3 else None
    slow = {host: rng.uniform(0.5, 2.4) for host in slow_hosts}
    failures = rng.choice([0.0, 0.0, 0.01, 0.05])
    record_s = rng.choice([(0.01, 2.0)] * 3 + [(60.0, 400.0)])  # a keeper busy past the placement deadline
    late_places = rng.choice([0.0, 0.0, 0.01, 0.1])  # places that end after their deadline
    store_deaths = rng.choice([0, 0, 1, 4])  # part store processes that die alone, started again by Ray
    return Profile(
        hosts=HOSTS, saves=8, slow=slow, network=network, death=death, stage_failures=failures, record_s=record_s,
        late_places=late_places, store_deaths=store_deaths,
    )  # fmt: skip


def sweep(seeds: range) -> None:
    replay = f"{REPLAY}=<seed> .venv/bin/python -m pytest tests/test_dsim_checkpoints.py::test_one_seed -s"
    broken = seeds_broken(lambda seed: World(seed, profile_of(seed)).run(), seeds, replay)
    assert not broken, "\n".join(broken)


def test_200_seeds_keep_every_invariant():
    sweep(range(200))


@pytest.mark.slow
def test_2000_seeds_keep_every_invariant():
    sweep(range(200, 2200))


def test_one_seed():
    """The replay: ``RAYCLUSTER_DSIM_SEED=N`` runs seed N alone and prints what it did, failing or not."""
    seed = int(os.environ.get(REPLAY, "0"))
    profile = profile_of(seed)
    print(f"seed {seed}: {profile}")
    world = World(seed, profile)
    try:
        world.run()
    finally:
        print(f"{world.sim.events} events; picks {sorted((p.attempt, p.name) for p in world.picks)}")
        print(f"committed {sorted(world.completed)}; not published:")
        failures = sorted(world.commits.failures.items())
        print("\n".join(f"  {name} (attempt {attempt}): {reason}" for name, (attempt, reason) in failures))


def test_a_part_store_started_again_fails_only_the_checkpoints_it_held_and_none_waits_for_a_deadline():
    """Part stores die alone and Ray starts them again (a call cut off or sent meanwhile reaches the new one), with
    messages late, reordered and repeated, no host slow: a checkpoint whose staged part died with a store fails
    as soon as its place reaches the new one, and nothing else fails; never at a deadline, with every later commit
    waiting behind it."""
    broken, lost = [], 0
    for seed in range(100):
        network = Network(slow_share=0.01, repeat_share=0.02)
        world = World(seed, Profile(hosts=HOSTS, saves=8, network=network, store_deaths=4)).run()
        reasons = {reason for _, reason in world.commits.failures.values()}
        died = "holds no staged copy of it (started again since it staged it)"
        broken += [f"seed {seed}: {reason}" for reason in reasons if died not in reason]
        lost += len(world.commits.failures)
    print(f"100 seeds, 4 part store deaths each: {lost} checkpoints failed with a store, of 800 saves")
    assert not broken, broken[:5]


def test_a_removal_that_gives_up_waiting_behind_a_late_place_leaves_nothing_in_any_root():
    """Places that end after their deadline (up to three deadlines: past the removal's own wait for its turn behind
    them), part stores dying in some seeds (within the saves' span, so never during a write whose removal gave up
    already): every invariant holds, no root keeps what no record names, and removals did give up waiting (a
    removal once lost that way left its part for good)."""
    gave_up = 0
    for seed in range(60):
        network = Network(slow_share=0.01, repeat_share=0.02)
        deaths = (0, 1, 4)[seed % 3]
        profile = Profile(hosts=HOSTS, saves=8, network=network, late_places=0.1, store_deaths=deaths)
        gave_up += World(seed, profile).run().calls.removals_gave_up
    print(f"60 seeds, a tenth of places late: {gave_up} removals gave up waiting for their turn")
    assert gave_up > 0


@pytest.mark.parametrize(
    "shape, slow",
    [
        ("every host within the save interval", {}),
        ("rank 0's host at 1.3 intervals", {0: 1.3}),
        ("8 of 64 hosts at 1.05-1.5 intervals", slow_hosts(HOSTS, 8)),
        ("every host at 1.05-1.5 intervals", slow_hosts(HOSTS, HOSTS)),
    ],
    ids=["fast", "lead-slow", "some-slow", "all-slow"],
)
def test_hosts_ship_the_same_steps_and_commit_at_the_pace_of_the_slowest(shape, slow):
    """200 saves: when every host stages within a save interval every save commits; when some are slower, a
    checkpoint commits each time the slowest host is free (each host choosing on its own committed 21 and 4)."""
    committed, best = paced_commits(HOSTS, slow)
    print(f"{shape}: {committed} of 200 committed, the most possible {best}")
    assert committed >= 0.97 * best and (slow or committed == 200)
