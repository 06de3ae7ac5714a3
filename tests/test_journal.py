"""The run journal's two counts (no Ray: the actor's own class): the worker groups, by which the watchdog knows
each rank from its first line, and the attempts that agreed on where to start, which the resume counts; and
what the watchdog must never forget, which groups failed and what hung."""

import random

from raycluster.training.journal import RunJournal

Journal = RunJournal.__ray_actor_class__


def test_every_rank_of_a_group_gets_its_number_whichever_asks_first(rng: random.Random):
    journal = Journal()
    for number, group in enumerate(("pg-a", "pg-b", "pg-c"), start=1):
        asks = [group] * 8
        rng.shuffle(asks)  # the ranks begin in any order
        assert {journal.group_of(g) for g in asks} == {number}
    assert journal.group_of("pg-a") == 1  # an earlier group's late ask keeps its number
    assert journal.groups() == 3


def test_a_group_that_fails_before_its_ranks_agree_is_watched_as_itself_and_is_no_attempt():
    journal = Journal()
    journal.group_of("pg-a")
    assert journal.attempt_started() == 1  # its rank 0, once every rank had begun
    journal.failure_seen(100.0)
    assert journal.failed_through() == 1  # the watchdog stops reading group 1
    journal.group_of("pg-b")  # its ranks began; it failed before they agreed on where to start
    journal.failure_seen(200.0)
    assert journal.failed_through() == 2  # group 2's beats are no longer read, not only group 1's
    journal.group_of("pg-c")
    assert journal.attempt_started() == 2  # the resume's count: the second attempt that agreed
    assert journal.groups() == 3 and journal.attempts() == 2
    assert [p.attempt for p in journal.phases()] == [1, 1]  # each failure recorded as the attempt it had agreed as


def test_the_hang_that_fails_the_run_is_the_newest_groups_own():
    journal = Journal()
    journal.group_of("pg-a")
    journal.hang_seen(1, "hang: no rank of attempt 1 made progress ...")
    assert journal.newest_hang() == "hang: no rank of attempt 1 made progress ..."
    journal.failure_seen(100.0)
    journal.group_of("pg-b")  # the restarted group: the first one's hang was recovered from
    assert journal.newest_hang() is None
