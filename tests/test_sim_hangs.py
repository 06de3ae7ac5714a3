"""A job never hangs and never bills idle hosts: on simulated hosts through SageMaker's own driver, a rank the
kernel stopped is found, shown and recovered from, and a head whose dashboard died still ends every host."""

import json
import os
import re
import signal
import time

import pytest

from conftest import TINY_ACT_HPS, pick
from raycluster.checkpoints.manifest import MANIFEST
from simulated import assert_clean, host_checkpoints, host_processes, training_workers, wait_for_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)"),
]
# A simulated host offers the 2 CPUs of this machine: one training worker on each.
HPS = {**TINY_ACT_HPS, "steps": 40, "save_freq": 5, "log_freq": 1, "cluster__cpus_per_worker": 2}


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def stop_a_worker_on_algo_2_after_the_first_checkpoint(workdir, rng) -> int:
    """SIGSTOP algo-2's training worker once checkpoint 5 is whole somewhere, at a moment the test does not
    choose; its pid on this machine."""
    first = [host_checkpoints(workdir, h) / "000005" / MANIFEST for h in ("algo-1", "algo-2")]
    wait_until(lambda: any(p.exists() for p in first) and training_workers(workdir, "algo-2"), 300, "no checkpoint 5")
    time.sleep(pick(rng, 0, 1.5, "seconds after checkpoint 5 before SIGSTOP"))
    [victim] = training_workers(workdir, "algo-2")
    os.kill(victim, signal.SIGSTOP)
    return victim


def test_a_stopped_rank_is_named_with_its_stack_and_the_group_restarts_from_the_checkpoint(job, tmp_path, rng):
    # A 20 s hang timeout proves what 60 s did (the verdict's wording and the restart do not depend on it), and
    # 20 steps leave room for the stop after checkpoint 5 and a resumed run after it.
    # Its own job: a rank is stopped by the kernel, and the worker group restarts.
    sim = job(tmp_path, 2, {**HPS, "steps": 20, "cluster__hang_timeout_s": 20, "cluster__max_failures": 1})
    stop_a_worker_on_algo_2_after_the_first_checkpoint(tmp_path, rng)
    result = sim.finish(timeout=600)
    assert all(h["exit_code"] == 0 for h in result.values()), result
    log = (tmp_path / "algo-1" / "log.txt").read_text()
    said = re.search(r"hang: no rank of attempt 1 made progress for \d+s after step \d+ .*", log)
    assert said, log[-5000:]
    assert re.search(r"rank \d on algo-2 \(pid \d+\) stuck \(\w[\w ]*, stopped, silent \d+s\) in ", said.group())
    assert re.search(r"rank \d on algo-1 \(pid \d+\) waiting \(", said.group())
    stacks = tmp_path / "algo-1" / "opt" / "ml" / "model" / "raycluster_hang_attempt1.txt"
    assert "stacks by py-spy" in stacks.read_text() and "train_loop_per_worker" in stacks.read_text()
    assert "stacks (every rank's in raycluster_hang_attempt1.txt):" in log and "TrainingThread" in log  # the log too
    summary = json.loads((tmp_path / "algo-1" / "opt" / "ml" / "model" / "raycluster_summary.json").read_text())
    assert summary["restarts"] == 1 and summary["resumed_from"] >= 5 and summary["final_step"] == 20, summary
    assert_clean()


def test_a_hang_with_no_restart_left_fails_every_host_in_time_naming_it(job, tmp_path, rng):
    timeout = 20
    # Its own job: a rank is stopped by the kernel, and the hang ends the job.
    sim = job(tmp_path, 2, {**HPS, "steps": 2000, "cluster__hang_timeout_s": timeout, "cluster__max_failures": 0})
    stop_a_worker_on_algo_2_after_the_first_checkpoint(tmp_path, rng)
    stopped = time.monotonic()
    result = sim.finish(timeout=300)
    assert time.monotonic() - stopped < timeout + 60  # every host has exited by then
    # The head ends the job with the driver's code and the hang as its reason; a worker host exits 0 once the
    # head has told it the job ended (the job's status and FailureReason are the head's).
    assert result["algo-1"]["exit_code"] == 1 and result["algo-2"] == {"exit_code": 0, "failure": None}, result
    assert "hang: no rank of attempt 1 made progress" in result["algo-1"]["failure"], result
    assert_clean()


@pytest.mark.parametrize(
    "signum, said",
    [
        # `ray start --block` stops the whole head node when its dashboard dies: the head sees its node gone.
        (signal.SIGKILL, "the Ray head node on algo-1 exited during the job: dashboard (exit code -9) died"),
        # A dashboard that hangs keeps the node up: the Jobs API's silence is the verdict.
        (signal.SIGSTOP, "the Ray dashboard on algo-1 (Jobs API, port 8265) has not answered for 30s"),
    ],
    ids=["killed", "stopped"],
)
def test_a_head_whose_dashboard_died_or_hangs_ends_every_host_in_bounded_time(job, tmp_path, signum, said):
    # Each its own job: the head's dashboard is killed or stopped, which ends the job.
    sim = job(tmp_path, 2, {**HPS, "steps": 2000})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "step:3 ", sim=sim)
    [dashboard] = host_processes(tmp_path, "algo-1", "dashboard/dashboard.py")
    os.kill(dashboard, signum)
    hit = time.monotonic()
    result = sim.finish(timeout=300)
    # Never SageMaker's MaxRuntime: the verdict (at once, or after 30 s of silence), the job's stop
    # (entry.stop_timeout_s 45 + its report at most), the nodes' stop.
    assert time.monotonic() - hit < 150, result
    assert result["algo-1"]["exit_code"] == 1 and said in result["algo-1"]["failure"], result
    assert result["algo-2"] == {"exit_code": 0, "failure": None}, result
    assert_clean()
