"""The evaluation keeper's protocol with the checkpoint keeper, on a real Ray cluster and a real keeper, with a
stand-in for the evaluation itself (``stand_in``: its outcome set per checkpoint below): holds against
retention, the best kept, failures and timeouts recorded, a backlog skipped oldest first, a stop that waits for
nothing. The real evaluation runs in ``test_evals_run.py``. Each wait is on an outcome, never on a sleep: a
stand-in that must still be running when the test acts waits for the test's word (``GATES``)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
import ray

from conftest import dead_pid
from published import OneHost
from raycluster.evals.keeper import evals_for_run
from raycluster.evals.plan import EvalPlan
from raycluster.evals.records import CANCELLED, FAILED, SKIPPED, TIMED_OUT, VALIDATED
from raycluster.evals.task import begin, evaluate_checkpoint
from raycluster.faults import NO_FAULTS, Faults

pytestmark = pytest.mark.cluster

OUTCOMES = {
    # checkpoint: (whether it runs until the test opens its gate, held-out loss or None to raise)
    "000001": (False, 0.5),
    "000002": (False, 0.3),
    "000003": (False, 0.4),
    "000004": (False, None),
    "000005": (True, 0.1),
    "000006": (True, 0.2),
}
GATES = Path(tempfile.gettempdir()) / f"raycluster-eval-gates-{os.getpid()}"
"""Where the test opens a gated stand-in's gate (a file named after its checkpoint); the tasks find it by this
same path, computed in the test process and passed to them in their environment."""


@ray.remote(max_retries=0)
def stand_in(checkpoint_keeper, evals, name: str, plan: EvalPlan, faults: Faults) -> dict:
    if not begin(evals, name, "10.0.0.9"):
        return None
    (Path(os.environ["RAYCLUSTER_TEST_GATES"]) / f"{name}.began").touch()  # what the test sees of its start
    gated, loss = OUTCOMES.get(name, (False, 1.0))
    gate, deadline = Path(os.environ["RAYCLUSTER_TEST_GATES"]) / name, time.monotonic() + 120
    while gated and not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if loss is None:
        raise ValueError(f"checkpoint {name} is unreadable")
    return {"metrics": {"eval_loss": loss}, "seconds": 0.0, "node": "10.0.0.9"}


def open_gate(name: str) -> None:
    (GATES / name).touch()


def began(name: str) -> bool:
    return (GATES / f"{name}.began").exists()


@pytest.fixture(scope="module")
def local_ray():
    # The stand-in is pickled by reference: the task's worker imports it from this directory.
    GATES.mkdir(parents=True, exist_ok=True)
    env = {"PYTHONPATH": str(Path(__file__).parent), "RAYCLUSTER_TEST_GATES": str(GATES)}
    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": env})
    yield
    ray.shutdown()
    for gate in GATES.iterdir():
        gate.unlink()
    GATES.rmdir()


def eventually(check, timeout: float = 60) -> None:
    """A task's start and its outcome come when its worker gets to them: poll ``check`` until it holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never came to hold"
        time.sleep(0.2)


def publish(host: OneHost, tmp_path, *names: str) -> None:
    """Each committed the way training commits it (a host's part store stages it), the evaluations told."""
    for name in names:
        source = tmp_path / "saved" / name
        source.mkdir(parents=True)
        (source / "pretrained_model").mkdir()
        (source / "pretrained_model" / "model.safetensors").write_bytes(name.encode() * 100)
        host.publish(source, name)


def run_of(tmp_path, keep: int = 0, faults: Faults = NO_FAULTS, task=stand_in, **plan):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging", keep, faults=faults)
    settings = {"held_out": True, "rollouts": False, "options": {"resources": {}}, "timeout_s": 30.0, **plan}
    return host, evals_for_run(EvalPlan(**settings), host.keeper, None, task=task, faults=faults)


def kept(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "root" / "checkpoints").iterdir() if p.name.isdigit())


def test_every_checkpoint_is_held_until_its_outcome_and_the_best_for_good(local_ray, tmp_path):
    host, evals = run_of(tmp_path, keep=1, metric="eval_loss")
    keeper = host.keeper
    publish(host, tmp_path, "000001", "000002", "000003", "000004")
    outcome = ray.get(evals.finish.remote(False), timeout=120)
    statuses = {e["checkpoint"]: e["status"] for e in outcome["evaluations"]}
    assert statuses == {"000001": VALIDATED, "000002": VALIDATED, "000003": VALIDATED, "000004": FAILED}
    failed = outcome["evaluations"][3]
    assert failed["error"] == "ValueError: checkpoint 000004 is unreadable" and failed["node"] == "10.0.0.9"
    assert outcome["best"] == {"checkpoint": "000002", "step": 2, "metric": "eval_loss", "value": 0.3}
    assert ray.get(keeper.evaluation_holds.remote()) == ["000002"]
    # Keep 1: the newest, and the best, which retention spared; the rest went once their outcomes were in.
    assert kept(tmp_path) == ["000002", "000004"]


def test_a_slow_evaluation_times_out_counted_from_its_start(local_ray, tmp_path):
    host, evals = run_of(tmp_path, timeout_s=2.0)
    keeper = host.keeper
    publish(host, tmp_path, "000005")  # gated: it runs until cancelled
    eventually(lambda: began("000005"))
    outcome = ray.get(evals.finish.remote(False), timeout=60)  # the timeout, counted from its start, comes first
    assert [(e["status"], e["error"]) for e in outcome["evaluations"]] == [
        (TIMED_OUT, "still running after --cluster.eval_timeout_s=2")
    ]
    assert ray.get(keeper.evaluation_holds.remote()) == []


def test_a_stop_waits_for_none_and_releases_every_hold_even_of_an_announcement_that_comes_after_it(local_ray, tmp_path):
    # The race of a stop, driven on purpose: the keeper's word of the commit is lost (the fault seam), so only
    # the stop's own reconciliation knows of 000005, and the word then comes after the stop, from the test.
    host, evals = run_of(tmp_path, faults=Faults(lose_announcements=True))
    keeper = host.keeper
    publish(host, tmp_path, "000005")
    assert ray.get(keeper.evaluation_holds.remote()) == ["000005"]  # held with its commit
    started = time.monotonic()
    outcome = ray.get(evals.finish.remote(True), timeout=60)
    assert time.monotonic() - started < 10
    assert [e["status"] for e in outcome["evaluations"]] == [CANCELLED]
    assert ray.get(keeper.evaluation_holds.remote()) == []  # released before the stop returned
    ray.get(evals.published.remote("000005"))  # the late word: released, never evaluated
    assert ray.get(keeper.evaluation_holds.remote()) == []
    publish(host, tmp_path, "000006")  # a commit after the stop is held for no one
    assert ray.get(keeper.evaluation_holds.remote()) == []
    assert kept(tmp_path) == ["000005", "000006"]


def test_a_backlog_beyond_the_capacity_skips_the_oldest_waiting(local_ray, tmp_path):
    # One CPU: 000006 runs (until the test opens its gate) while 000007-000011 wait; the fifth waiting one makes
    # the oldest give way, and the end of the run waits for the rest.
    host, evals = run_of(tmp_path)
    keeper = host.keeper
    publish(host, tmp_path, "000006")
    eventually(lambda: began("000006"))
    publish(host, tmp_path, "000007", "000008", "000009", "000010", "000011")
    # 000007 skipped once 000011 was announced: its hold released, the others' kept while they wait.
    eventually(lambda: ray.get(keeper.evaluation_holds.remote()) == ["000006", "000008", "000009", "000010", "000011"])
    assert not began("000007")
    open_gate("000006")
    outcome = ray.get(evals.finish.remote(False), timeout=120)
    statuses = {e["checkpoint"]: e["status"] for e in outcome["evaluations"]}
    assert statuses == {
        "000006": VALIDATED, "000007": SKIPPED, "000008": VALIDATED, "000009": VALIDATED, "000010": VALIDATED,
        "000011": VALIDATED,
    }  # fmt: skip
    assert "checkpoint 000011 came before it found capacity" in outcome["evaluations"][1]["error"]
    assert ray.get(keeper.evaluation_holds.remote()) == []


def test_an_evaluation_removes_what_a_cancelled_one_left_in_its_scratch(local_ray, tmp_path):
    """The real evaluation task, stopped by a fault right after it looked at its scratch: what an evaluation
    killed mid-run (its pid gone) left in the temporary folder is gone."""
    owner = f"{socket.gethostname()}-{dead_pid()}"
    left = Path(tempfile.gettempdir()) / f"raycluster-eval-000001-test{os.getpid()}.scratch-{owner}"
    (left / "000001" / "pretrained_model").mkdir(parents=True)
    try:
        host, evals = run_of(tmp_path, faults=Faults(eval_raise=(1,)), task=evaluate_checkpoint)
        publish(host, tmp_path, "000001")
        outcome = ray.get(evals.finish.remote(False), timeout=120)
        assert [e["status"] for e in outcome["evaluations"]] == [FAILED]  # the fault, once the scratch was seen to
        assert not left.exists()
    finally:
        shutil.rmtree(left, ignore_errors=True)
