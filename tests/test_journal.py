"""The run journal's count of attempts, which every rank asks at its first line (no Ray: the actor's own class)."""

import random

from raycluster.training.journal import RunJournal

Journal = RunJournal.__ray_actor_class__


def test_every_rank_of_a_group_gets_its_attempt_whichever_asks_first(rng: random.Random):
    journal = Journal()
    for attempt, group in enumerate(("pg-a", "pg-b", "pg-c"), start=1):
        asks = [group] * 8
        rng.shuffle(asks)  # the ranks begin in any order
        assert {journal.attempt_of(g) for g in asks} == {attempt}
    assert journal.attempt_of("pg-a") == 1  # an earlier group's late ask keeps its number
    assert journal.attempts() == 3


def test_a_group_that_fails_before_its_ranks_agree_is_an_attempt_of_its_own():
    journal = Journal()
    journal.attempt_of("pg-a")
    assert journal.failure_seen(100.0) == 1
    journal.attempt_of("pg-b")  # its ranks began; it failed before any of them agreed on where to start
    assert journal.failure_seen(200.0) == 2  # the board stops watching this group's beats, not the first's
    assert journal.attempt_of("pg-c") == 3 and journal.attempts() == 3
