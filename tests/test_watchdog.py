"""The hang watchdog's verdict over the ranks' beats, and the stacks it takes from real processes."""

import signal
import subprocess
import sys
import time

import pytest

from raycluster.training.progress import DONE, PUBLISHING, SAVING, STARTING, TRAINING, Beat
from raycluster.training.stacks import answer_stack_requests, process_state, py_spy, take_stack
from raycluster.training.watchdog import Allowances, describe, find_hang, where

ALLOW = Allowances.for_timeout(60)


def beat(rank: int, activity: str = TRAINING, idle: float = 0.0, silent: float = 1.0, attempt: int = 1) -> Beat:
    host, node = f"algo-{rank + 1}", f"node{rank}"
    return Beat(rank, attempt, host, node, 100 + rank, 0x7F00, 200 + rank, 10, activity, idle, silent)


def test_a_group_is_hung_only_when_every_rank_is_past_its_own_activitys_allowance():
    assert find_hang([beat(0, idle=61), beat(1, idle=30)], ALLOW) is None  # rank 1 stepped 31 s ago
    hang = find_hang([beat(0, idle=61), beat(1, idle=70)], ALLOW)
    assert hang is not None and [b.rank for b in hang.stuck] == [0, 1]  # all beat: none told apart
    # A save, a first step and the final publish take longer than a step, and are allowed to.
    assert find_hang([beat(0, SAVING, idle=600), beat(1, idle=600)], ALLOW) is None
    assert find_hang([beat(0, STARTING, idle=800), beat(1, STARTING, idle=800)], ALLOW) is None
    assert find_hang([beat(0, PUBLISHING, idle=1700), beat(1, DONE, idle=1700)], ALLOW) is None
    assert find_hang([beat(0, SAVING, idle=901), beat(1, idle=901)], ALLOW) is not None
    assert find_hang([beat(1, DONE, idle=5000)], ALLOW) is None  # nothing left to watch
    # ... unless the saving rank went silent: stopped or frozen, it saves nothing any more.
    assert find_hang([beat(0, SAVING, idle=10, silent=55), beat(1, idle=65)], ALLOW) is not None
    assert ALLOW.of(TRAINING) == 60 and Allowances.for_timeout(3600).of(SAVING) == 3600  # never below the timeout


def test_the_rank_that_stopped_beating_is_the_stuck_one_and_the_line_says_where_each_rank_is():
    # rank 1 was stopped by the kernel 50 s ago: its last beat, sent then, said it had just stepped
    ranks = [beat(0, idle=60, silent=2), beat(1, idle=15, silent=50)]
    hang = find_hang(ranks, ALLOW)
    assert hang is not None and [b.rank for b in hang.stuck] == [1]
    spied = {
        100: ("sleeping", "py-spy", 'Thread 200 (idle): "TrainingThread(train_fn)"\n'
             "    all_reduce (torch/distributed/c10d.py:81)\n"
             "    after_step (raycluster/training/interrupt.py:120)\n"),
        101: ("stopped", "py-spy", 'Thread 5 (idle): "MainThread"\n    main_loop (ray/worker.py:1)\nThread 201 (idle)\n'
             '    __next__ (torch/utils/data.py:733)\n'),
    }  # fmt: skip
    line = describe(hang, ALLOW, spied, "/out/raycluster_hang_attempt1.txt")
    assert line.startswith(
        "hang: no rank of attempt 1 made progress for 62s after step 10 (--cluster.hang_timeout_s=60)"
    )
    assert (
        "rank 1 on algo-2 (pid 101) stuck (training, stopped, silent 50s) in __next__ (torch/utils/data.py:733)" in line
    )
    assert "rank 0 on algo-1 (pid 100) waiting (training, sleeping) in all_reduce (torch/distributed/c10d.py:81), " \
           "from after_step (raycluster/training/interrupt.py:120)" in line  # fmt: skip
    assert line.endswith("stacks in /out/raycluster_hang_attempt1.txt") and "\n" not in line


def test_faulthandlers_training_thread_is_found_by_its_python_id():
    text = (
        "--- process 7 (the rank)\nThread 0x00007f0000000001 (most recent call first):\n"
        '  File "/x/threading.py", line 355 in wait\n\n'
        "Current thread 0x0000000000007f00 (most recent call first):\n"
        '  File "/x/lerobot/scripts/lerobot_train.py", line 600 in train\n'
    )
    assert where(text, 0x7F00, 9) == '"/x/lerobot/scripts/lerobot_train.py", line 600 in train'


@pytest.fixture
def sleeper():
    """A process of this test's own that answers stack requests as a rank does, asleep in ``nap``."""
    code = (
        f"import sys, time; sys.path.insert(0, {str(sys.path[0])!r})\n"
        "from raycluster.training.stacks import answer_stack_requests\n"
        "answer_stack_requests()\n"
        "def nap():\n    print('ready', flush=True)\n    time.sleep(600)\n"
        "nap()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n"
        yield process
    finally:
        process.kill()
        process.wait()


def test_stacks_come_from_faulthandler_without_ptrace_rights_and_from_py_spy_even_when_stopped(sleeper):
    assert answer_stack_requests  # the rank's side, run by the sleeper
    how, text = take_stack(sleeper.pid, spy=None)  # as in a container without ptrace rights
    assert how == "faulthandler" and "in nap" in text, text
    sleeper.send_signal(signal.SIGSTOP)
    time.sleep(0.2)
    assert process_state(sleeper.pid) == "stopped"
    how, text = take_stack(sleeper.pid, spy=None)
    assert how == "none" and "the process is stopped" in text and "py-spy is missing" in text
    spy = py_spy()
    assert spy is not None  # ray[default] installs it
    how, text = take_stack(sleeper.pid, spy)
    if how == "py-spy":
        assert "nap (<string>:" in text, text
    else:  # this machine refuses ptrace: the line says so
        assert "no ptrace rights" in text
    sleeper.send_signal(signal.SIGCONT)
