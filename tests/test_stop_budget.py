"""One stop budget: for every entry.stop_timeout_s the entry settings accept, the parts fit in the 120 s
between SageMaker's SIGTERM and its SIGKILL, and each party's deadline comes from it."""

import pytest

from raycluster.errors import UsageError
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.stop_budget import MAX_STOP_TIMEOUT_S, SIGKILL_AFTER_S, StopBudget


def accepted(stop_timeout_s: float) -> bool:
    try:
        EntrySettings(stop_timeout_s=stop_timeout_s).check()
    except UsageError:
        return False
    return True


def test_the_parts_fit_for_every_accepted_stop_timeout():
    tried = [0.001, 0.5, 1, *range(2, 61), 59.999, MAX_STOP_TIMEOUT_S, 60.001, 61, 90, 120]
    for stop_timeout_s in tried:
        budget = StopBudget(stop_timeout_s)
        if accepted(stop_timeout_s):
            assert budget.problems() == [], (stop_timeout_s, budget.problems())
            # The worker hosts hear the outcome before they would give up: the bug this budget replaced
            # (workers gave up at stop_timeout_s + 10 s while the head published at up to ~82 s).
            assert budget.outcome_by + budget.poll_s <= budget.worker_gives_up_at
            assert budget.head_node_stop_at + budget.node_stop_s + budget.exit_s <= SIGKILL_AFTER_S
    assert not accepted(60.001) and accepted(MAX_STOP_TIMEOUT_S)


@pytest.mark.parametrize("stop_timeout_s", [80, 100])
def test_a_budget_that_does_not_fit_says_which_part(stop_timeout_s):
    assert "the head cannot release its workers" in StopBudget(stop_timeout_s).problems()
