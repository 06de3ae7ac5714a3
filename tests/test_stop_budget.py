"""One stop budget: for every entry.stop_timeout_s the entry settings accept, the parts fit in the 120 s
between SageMaker's SIGTERM and its SIGKILL, and each party's deadline comes from it."""

import ast
import re
from pathlib import Path

import pytest

import raycluster.sagemaker
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
            assert budget.outcome_by + budget.poll_s + budget.read_s <= budget.worker_gives_up_at
            assert budget.head_node_stop_at + budget.node_stop_s + budget.exit_s <= SIGKILL_AFTER_S
    assert not accepted(60.001) and accepted(MAX_STOP_TIMEOUT_S)


@pytest.mark.parametrize("stop_timeout_s", [80, 100])
def test_a_budget_that_does_not_fit_says_which_part(stop_timeout_s):
    assert "the head cannot release its workers" in StopBudget(stop_timeout_s).problems()


HOST_CODE = ["head.py", "worker_host.py", "members.py", "interactive.py"]
"""What runs on a host between SageMaker's SIGTERM and its SIGKILL: the budget's parties."""
WAITS = {"sleep", "wait", "wait_for", "wait_for_all", "call_within", "ask", "stop", "finish", "join"}
WAITS |= {"end_requested", "alive_node_ips", "read_outcome"}
"""Calls that block: a sleep, an event's wait, a thread's join, a Ray or HTTP call given a timeout."""
STOP_CLOCK = re.compile(r"\bstop\.wait$")
"""The stop clock's own wait, which returns at the SIGTERM."""
BOUNDED = re.compile(r"\bbudget\.|\bstop\.(until|left|is_set)\(|\bstop=")
"""A bound from the budget, or a wait the stop clock cuts short."""
OWN_BOUND = {
    "interactive.py: state.end_requested(timeout=2)": "one read of the cluster's state between two checks of "
    "the stop clock (2 s): inside the exit slack, and no job runs while the cluster is interactive",
    "members.py: self.state.alive_node_ips()": "Ray's state API with its own 5 s timeout, once per poll",
    "head.py: self.members.wait_for_all(self.settings.join_timeout_s)": "Members checks the stop clock at every "
    "poll (members.py is checked here too)",
}


def waits_outside_the_budget(path: Path) -> list[str]:
    """Each blocking call in ``path`` whose bound is neither a share of the stop budget (``budget``) nor cut short
    by the stop clock (``stop``: its wait, its ``until``, a predicate or a call that checks it), nor named above.
    A bound held in a local name is read from where that name was assigned in the same function."""
    found = []
    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigned = {t.id: ast.unparse(n.value) for n in ast.walk(function) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            name, callee = getattr(call.func, "attr", getattr(call.func, "id", None)), ast.unparse(call.func)
            if name not in WAITS or isinstance(getattr(call.func, "value", None), ast.Constant):  # not str.join
                continue
            bound = " ".join(ast.unparse(arg) for arg in [*call.args, *call.keywords])
            bound += " ".join(assigned.get(n.id, "") for n in ast.walk(call) if isinstance(n, ast.Name))
            if not STOP_CLOCK.search(callee) and not BOUNDED.search(bound):
                found.append(f"{path.name}: {ast.unparse(call)}")
    return [wait for wait in found if wait not in OWN_BOUND]


def test_every_wait_of_the_head_and_the_worker_hosts_is_within_its_share(tmp_path):
    """The budget's arithmetic holds (above) only if the code waits as it says: a host that slept, joined or asked
    for longer than its share, after a SIGTERM, would outlast SageMaker's SIGKILL with its node up."""
    code = Path(raycluster.sagemaker.__file__).parent
    outside = [wait for name in HOST_CODE for wait in waits_outside_the_budget(code / name)]
    assert outside == [], f"waits bounded neither by the stop budget nor by the stop clock: {outside}"
    # The check itself: it sees a fixed wait, and one whose predicate only looks like the stop clock's.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(self, node):\n    time.sleep(1)\n    wait_for(lambda: node.stopped(), 60)\n"
        "    time.sleep(self.budget.poll_s)\n    self.stop.wait(1)\n    ', '.join([])\n"
    )
    assert waits_outside_the_budget(sample) == [
        "sample.py: time.sleep(1)",
        "sample.py: wait_for(lambda: node.stopped(), 60)",
    ]
