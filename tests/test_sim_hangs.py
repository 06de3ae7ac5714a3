"""A job never hangs and never bills idle hosts: on simulated hosts through SageMaker's own driver, a rank the
kernel stopped is found, shown and recovered from, and a head whose dashboard died still ends every host."""

import os
import re
import signal
import time
from pathlib import Path

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


def stop_a_worker_on_algo_2_after(workdir, rng, checkpoint: str, spared: int | None = None) -> int:
    """SIGSTOP algo-2's training worker (not ``spared``, an earlier victim) once ``checkpoint`` is whole somewhere,
    at a moment the test does not choose; its pid on this machine."""
    whole = [host_checkpoints(workdir, h) / checkpoint / MANIFEST for h in ("algo-1", "algo-2")]

    def ready() -> list[int]:
        return (
            [pid for pid in training_workers(workdir, "algo-2") if pid != spared]
            if any(map(Path.exists, whole))
            else []
        )

    wait_until(ready, 300, f"no checkpoint {checkpoint} with a worker on algo-2")
    time.sleep(pick(rng, 0, 1.5, f"seconds after checkpoint {checkpoint} before SIGSTOP"))
    [victim] = ready()
    os.kill(victim, signal.SIGSTOP)
    return victim


def test_a_stopped_rank_is_named_with_its_stack_the_group_restarts_and_a_hang_with_no_restart_left_fails(
    job, tmp_path, rng
):
    """Two hangs in one job (a 15 s hang timeout, one restart): the first is named with its stacks and the group
    restarts from the checkpoint; the restarted group goes on, saves, and its own hang ends every host in time.
    (That a restarted group runs to its last step is shown by the killed-worker runs.)"""
    timeout = 15  # 37 times a step here (0.4 s); the shorter the timeout, the shorter the two waits
    # Its own job: a rank is stopped by the kernel, twice.
    sim = job(tmp_path, 2, {**HPS, "steps": 2000, "cluster__hang_timeout_s": timeout, "cluster__max_failures": 1})
    first = stop_a_worker_on_algo_2_after(tmp_path, rng, "000005")
    log_file = tmp_path / "algo-1" / "log.txt"
    wait_for_log(log_file, "attempt 2: resuming from", sim=sim)
    resumed = int(re.search(r"attempt 2: resuming from \D*(\d+)", log_file.read_text()).group(1))
    assert resumed >= 5, resumed
    # The restarted group trains past the step it resumed from and saves again before its own rank stops.
    stop_a_worker_on_algo_2_after(tmp_path, rng, f"{(resumed // 5 + 1) * 5:06d}", spared=first)
    stopped = time.monotonic()
    result = sim.finish(timeout=300)
    assert time.monotonic() - stopped < timeout + 60  # every host has exited by then
    log = log_file.read_text()
    said = re.search(r"hang: no rank of attempt 1 made progress for \d+s after step \d+ .*", log)
    assert said, log[-5000:]
    assert re.search(r"rank \d on algo-2 \(pid \d+\) stuck \(\w[\w ]*, stopped, silent \d+s\) in ", said.group())
    assert re.search(r"rank \d on algo-1 \(pid \d+\) waiting \(", said.group())
    stacks = tmp_path / "algo-1" / "opt" / "ml" / "model" / "raycluster_hang_attempt1.txt"
    assert "stacks by py-spy" in stacks.read_text() and "train_loop_per_worker" in stacks.read_text()
    assert "stacks (every rank's in raycluster_hang_attempt1.txt):" in log and "TrainingThread" in log  # the log too
    # The head ends the job with the driver's code and the second hang as its reason; a worker host, told so by
    # the head, fails with the same code and reason (its log never ends as a success of a failed job).
    assert result["algo-1"]["exit_code"] == 1 and result["algo-2"] == result["algo-1"], result
    assert "hang: no rank of attempt 2 made progress" in result["algo-1"]["failure"], result
    assert "stacks in /opt/ml/model/raycluster_hang_attempt2.txt): rank" in result["algo-1"]["failure"], result
    assert_clean()


@pytest.mark.parametrize(
    "signum, said",
    [
        # `ray start --block` stops the whole head node when its dashboard dies: the head sees its node gone.
        (signal.SIGKILL, "the Ray head node on algo-1 exited during the job: dashboard (exit code -9) died"),
        # A dashboard that hangs keeps the node up: the Jobs API's silence is the verdict.
        (signal.SIGSTOP, "the Ray dashboard on algo-1 (Jobs API, port 8265) has not answered for 10s"),
    ],
    ids=["killed", "stopped"],
)
def test_a_head_whose_dashboard_died_or_hangs_ends_every_host_in_bounded_time(job, tmp_path, signum, said):
    # Each its own job: the head's dashboard is killed or stopped, which ends the job.
    # The Jobs API's silence is tolerated 10 s here, not the default 30 s: the verdict is what this checks.
    sim = job(tmp_path, 2, {**HPS, "steps": 2000, "entry__jobs_api_lost_s": 10})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "step:3 ", sim=sim)
    [dashboard] = host_processes(tmp_path, "algo-1", "dashboard/dashboard.py")
    os.kill(dashboard, signum)
    hit = time.monotonic()
    result = sim.finish(timeout=300)
    # Never SageMaker's MaxRuntime: the verdict (at once, or after 10 s of silence), the job's stop
    # (entry.stop_timeout_s 45 + its report at most), the nodes' stop.
    assert time.monotonic() - hit < 150, result
    assert result["algo-1"]["exit_code"] == 1 and said in result["algo-1"]["failure"], result
    assert result["algo-2"] == result["algo-1"], result  # told by the head how the job ended
    assert_clean()
