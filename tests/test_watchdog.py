"""The hang watchdog's verdict over the ranks' beats, and the stacks it takes from real processes."""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from dataclasses import replace

import psutil
import pytest

from raycluster.training.watch import watchdog as watchdog_module
from raycluster.training.watch.hang_report import describe, shown_in_the_log, where
from raycluster.training.watch.progress import (
    AGREEING,
    DONE,
    PUBLISHING,
    SAVING,
    STARTING,
    TRAINING,
    VALIDATING,
    Beat,
    Beats,
    ProgressBeacon,
)
from raycluster.training.watch.rank_process import BytesMoved, started_at
from raycluster.training.watch.stacks import answer_stack_requests, end_family, process_state, py_spy, take_stack
from raycluster.training.watch.watchdog import Allowances, Watchdog, Watched, find_hang

ALLOW = Allowances.for_timeout(60)


def beat(rank: int, activity=TRAINING, idle=0.0, silent=1.0, attempt=1, seq=1, host=None) -> Beat:
    host, node = host or f"algo-{rank + 1}", f"node{rank}"
    return Beat(rank, attempt, host, node, 100 + rank, 5.0, 0x7F00, 200 + rank, 10, activity, idle, seq, silent)


def test_a_group_is_hung_only_when_every_rank_is_past_its_own_activitys_allowance():
    assert find_hang([beat(0, idle=61), beat(1, idle=30)], ALLOW) is None  # rank 1 stepped 31 s ago
    hang = find_hang([beat(0, idle=61), beat(1, idle=70)], ALLOW)
    assert hang is not None and [b.rank for b in hang.stuck] == [0, 1]  # all beat: none told apart
    # A save, a first step and the final publish take longer than a step, and are allowed to.
    assert find_hang([beat(0, SAVING, idle=600), beat(1, idle=600)], ALLOW) is None
    assert find_hang([beat(0, STARTING, idle=800), beat(1, STARTING, idle=800)], ALLOW) is None
    # Before the attempt is agreed, the resume path's own deadlines follow one another (up to ~21 minutes).
    assert find_hang([beat(0, AGREEING, idle=1300), beat(1, AGREEING, idle=1300)], ALLOW) is None
    assert find_hang([beat(0, AGREEING, idle=1801), beat(1, AGREEING, idle=1801)], ALLOW) is not None
    assert find_hang([beat(0, PUBLISHING, idle=1700), beat(1, DONE, idle=1700)], ALLOW) is None
    assert find_hang([beat(0, SAVING, idle=901), beat(1, idle=901)], ALLOW) is not None
    assert find_hang([beat(1, DONE, idle=5000)], ALLOW) is None  # nothing left to watch
    # ... unless the saving rank has been silent longer than a step: stopped or frozen, it saves nothing any more.
    assert find_hang([beat(0, SAVING, idle=10, silent=65), beat(1, idle=65)], ALLOW) is not None
    # A beacon starved for a while (a long C call holding the GIL) is no verdict on a rank that saves.
    assert find_hang([beat(0, SAVING, idle=10, silent=40), beat(1, idle=65)], ALLOW) is None
    assert ALLOW.of(TRAINING) == 60 and Allowances.for_timeout(3600).of(SAVING) == 3600  # never below the timeout
    # The shortest timeout (10 s) beats every 1.7 s: a rank between two beats is never taken for a silent one.
    short = Allowances.for_timeout(10)
    assert find_hang([beat(0, idle=0.2, silent=1.6), beat(1, idle=0.1, silent=11)], short) is None


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
    line = describe(hang, ALLOW.step_s, spied, "/out/raycluster_hang_attempt1.txt")
    assert line.startswith(  # the stacks' file and the stuck rank first: a FailureReason keeps 1,024 characters
        "hang: no rank of attempt 1 made progress for 62s after step 10 (--cluster.hang_timeout_s=60; "
        "stacks in /out/raycluster_hang_attempt1.txt): rank 1 on algo-2 (pid 101) stuck"
    )
    assert (
        "rank 1 on algo-2 (pid 101) stuck (training, stopped, silent 50s) in __next__ (torch/utils/data.py:733)" in line
    )
    assert "rank 0 on algo-1 (pid 100) waiting (training, sleeping) in all_reduce (torch/distributed/c10d.py:81), " \
           "from after_step (raycluster/training/interrupt.py:120)" in line  # fmt: skip
    assert "\n" not in line


def test_at_scale_the_line_names_the_stuck_rank_and_counts_the_ranks_waiting_in_one_place():
    ranks = [beat(n, idle=70, silent=2, host=f"algo-{n // 8 + 1}") for n in range(512)]
    ranks[300] = beat(300, idle=10, silent=60, host="algo-38")
    hang = find_hang(ranks, ALLOW)
    assert [b.rank for b in hang.stuck] == [300]
    line = describe(hang, ALLOW.step_s, {}, "/f")
    assert "rank 300 on algo-38 (pid 400) stuck (training, unknown, silent 60s) in no stack" in line
    assert "511 ranks on 64 hosts waiting (training, unknown) in no stack" in line and len(line) < 1000
    assert [b.rank for b in shown_in_the_log(hang, {})] == [0, 300]  # the log shows one per place; the file all


def test_at_scale_with_every_rank_beating_the_rank_alone_in_its_place_comes_first_and_the_line_stays_short():
    # The common NCCL hang: every rank's beacon beats, no rank steps; rank 300 sits in its data loader while
    # the other 511 wait in the all-reduce. Every rank counts as hung; the odd one is named before the crowd.
    ranks = [beat(n, idle=70, silent=2, host=f"algo-{n // 8 + 1}") for n in range(512)]
    hang = find_hang(ranks, ALLOW)
    assert len(hang.stuck) == 512
    collective = 'Thread 200 (idle): "TrainingThread(train_fn)"\n    all_reduce (torch/distributed/c10d.py:81)\n'
    loader = 'Thread 500 (idle): "TrainingThread(train_fn)"\n    __next__ (torch/utils/data.py:733)\n'
    taken = {b.pid: ("sleeping", "py-spy", collective.replace("200", str(b.native_thread))) for b in ranks}
    taken[400] = ("sleeping", "py-spy", loader)
    line = describe(hang, ALLOW.step_s, taken, "/opt/ml/model/raycluster_hang_attempt1.txt")
    culprit = "rank 300 on algo-38 (pid 400) hung (training, sleeping) in __next__ (torch/utils/data.py:733)"
    crowd = "511 ranks on 64 hosts hung (training, sleeping) in all_reduce (torch/distributed/c10d.py:81)"
    assert line.endswith(f"raycluster_hang_attempt1.txt): {culprit}; {crowd}"), line
    assert [b.rank for b in shown_in_the_log(hang, taken)] == [0, 300]  # the log shows 2 stacks, not 512
    # 512 ranks each in a place of its own: the line still names a bounded few and counts the rest.
    own = {b.pid: loader.replace("500", str(b.native_thread)).replace("733", str(b.rank)) for b in ranks}
    scattered = {pid: ("sleeping", "py-spy", text) for pid, text in own.items()}
    line = describe(hang, ALLOW.step_s, scattered, "/f")
    named = line.split("/f): ", 1)[1].split("; ")
    counted = int(named[-1].removesuffix(" more ranks elsewhere"))
    assert len(named) <= 12 and counted + len(named) - 1 == 512 and len(line) <= 1000, line
    assert len(shown_in_the_log(hang, scattered)) == 12
    # Frames as long paths (faulthandler's): the line still holds the culprit and the file, in 1,000 characters.
    deep = "/opt/conda/lib/python3.12/site-packages/" + "x" * 150
    long = {pid: (state, how, text.replace("torch/utils", deep)) for pid, (state, how, text) in taken.items()}
    line = describe(hang, ALLOW.step_s, long, "/opt/ml/model/raycluster_hang_attempt1.txt")
    assert len(line) <= 1000 and "raycluster_hang_attempt1.txt): rank 300 on algo-38 (pid 400) hung" in line, line


def test_the_board_keeps_each_ranks_newest_beat_of_the_newest_running_attempt():
    board = Beats()
    board.beat(beat(0, seq=2, idle=1), now=10)
    board.beat(beat(0, SAVING, seq=1), now=11)  # overtaken in flight: older than what the board holds
    assert [(b.activity, b.silent_s) for b in board.newest_attempt(now=12, failed_through=0)] == [(TRAINING, 2)]
    # Ray Train saw attempt 1 fail (the journal's word at the next read), and a beat of it still in flight arrives.
    board.beat(beat(1, seq=5), now=13)
    assert board.newest_attempt(now=14, failed_through=1) == []  # between attempts: no hang of the dead one
    board.beat(beat(0, attempt=2), now=15)  # attempt 2 failed before any of its beats reached the board
    board.beat(beat(1, attempt=3), now=15)
    assert [(b.attempt, b.rank) for b in board.newest_attempt(now=16, failed_through=2)] == [(3, 1)]


def test_a_restarted_board_never_watches_a_failed_group_again():
    # The board's process died and Ray restarted it empty, after attempt 1 failed and before attempt 2 beat:
    # a beat of attempt 1 still in flight lands on the new board. Which groups failed is the journal's word.
    board = Beats()
    board.beat(beat(1, seq=9), now=20)
    assert board.newest_attempt(now=200, failed_through=1) == []  # silent for 180 s, and never a hang


def test_the_beacon_says_what_follows_a_save_and_its_last_word_is_done():
    sent: list[Beat] = []
    beacon = ProgressBeacon(sent.append, 0, 1, ("algo-1", "node0"), every_s=3600)
    assert beacon._beat.activity == AGREEING  # from the rank's first line, before LeRobot's flags are read
    beacon.validating_at((4, 0))  # once they are: LeRobot validates after step 4 (0: a validation that is off)
    beacon.after_step(3, 0.5, None)
    assert beacon._beat.activity == TRAINING  # fmt: skip
    beacon.after_step(4, 0.5, None)  # a validation step that also saves: the save, then the validation
    beacon.checkpoint_started("000004")
    assert beacon._beat.activity == SAVING
    beacon.checkpoint_saved("000004")
    assert beacon._beat.activity == VALIDATING and beacon._beat.step == 4
    beacon.stop()
    assert sent[-1].activity == DONE and [b.seq for b in sent] == sorted({b.seq for b in sent})


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
        "from raycluster.training.watch.stacks import answer_stack_requests\n"
        "answer_stack_requests()\n"
        "import subprocess\n"  # a child without the handler, as a spawned data-loader worker or ffmpeg is
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "def nap():\n    print(child.pid, flush=True)\n    time.sleep(600)\n"
        "nap()\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    try:
        yield process, child
    finally:
        process.kill()
        process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_stacks_come_from_faulthandler_without_ptrace_rights_and_from_py_spy_even_when_stopped(sleeper):
    sleeper, child = sleeper
    assert answer_stack_requests  # the rank's side, run by the sleeper
    how, text = take_stack(sleeper.pid, spy=None)  # as in a container without ptrace rights
    assert how == "faulthandler" and "in nap" in text, text
    assert process_state(child) == "sleeping"  # not sent the signal it has no handler for: it would have died
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


def test_a_hung_rank_is_ended_with_the_processes_it_started_and_a_reused_pid_is_spared(sleeper):
    sleeper, child = sleeper
    sleeper.send_signal(signal.SIGSTOP)  # hung, as the kernel stops it
    time.sleep(0.2)
    assert end_family(sleeper.pid, started_at(sleeper.pid) + 1) == []  # another process that got the same pid
    assert process_state(sleeper.pid) == "stopped" and process_state(child) in ("running", "sleeping")
    assert sorted(end_family(sleeper.pid, started_at(sleeper.pid))) == sorted([sleeper.pid, child])
    sleeper.wait(timeout=10)
    deadline = time.monotonic() + 10
    while process_state(child) not in ("gone", "zombie") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_state(child) in ("gone", "zombie")  # not reparented and left running


def test_a_beat_that_cannot_be_sent_does_not_end_the_beats():
    sent: list[Beat] = []

    def send(beat: Beat) -> None:
        if len(sent) == 0 and not getattr(send, "failed", False):
            send.failed = True
            raise RuntimeError("the board is restarting")
        sent.append(beat)

    beacon = ProgressBeacon(send, 0, 1, ("algo-1", "node0"), every_s=0.05)
    deadline = time.monotonic() + 10
    while len(sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    beacon.stop()
    assert len(sent) >= 3 and sent[0].started == started_at(os.getpid())
    # Seconds since boot, as psutil's create time less the boot time would say (while the wall clock holds still).
    assert abs(started_at(os.getpid()) - (psutil.Process().create_time() - psutil.boot_time())) < 0.05


def test_a_watchdog_that_cannot_check_says_so_once_and_again_when_it_can(caplog):
    # The board gone (its process died, Ray restarting it): every check fails until it is back.
    watchdog = Watchdog(Watched(None, None, None, None, None), Allowances.for_timeout(6), [])  # a check a second
    outcomes = iter([RuntimeError("ActorDiedError: the board died")] * 3 + [None] * 100)

    def check() -> None:
        if (failure := next(outcomes)) is not None:
            raise failure

    watchdog.check = check
    done = threading.Event()
    with caplog.at_level("INFO", logger="raycluster.training.watch.watchdog"):
        thread = watchdog.start(done)
        deadline = time.monotonic() + 30  # a check a second, later on a loaded machine
        while "checks again" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.2)
        done.set()
        thread.join(timeout=5)
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "the hang watchdog cannot check (1 failed checks): ActorDiedError: the board died; no hang is seen until it can",
        "the hang watchdog checks again, after 3 failed checks",
    ], said


def test_data_moving_is_progress_whatever_the_step_does(tmp_path):
    # A pretrained policy downloading before the first step, a push to the Hub after the last: no step for
    # minutes, yet the rank is at work. Bytes read or written are progress; a trickle (Ray's own) is not.
    sent, moved = [], [0]
    beacon = ProgressBeacon(sent.append, 0, 1, ("algo-1", "node0"), every_s=3600, moved=lambda: moved[0])
    time.sleep(0.4)
    beacon.beat_now()
    assert sent[-1].idle_s >= 0.4  # nothing moved
    moved[0] += 2**20  # 1 MiB in about 0.3 s
    time.sleep(0.3)
    beacon.beat_now()
    assert sent[-1].idle_s < 0.05 and sent[-1].activity == AGREEING
    moved[0] += 1000
    time.sleep(0.4)
    beacon.beat_now()
    assert sent[-1].idle_s >= 0.4  # a trickle is no progress
    beacon.stop()
    # What the beacon counts by default: this process's reads and writes (a file written: a download landing).
    moved = BytesMoved(os.getpid())
    before = moved()
    (tmp_path / "blob").write_bytes(b"x" * 2**20)
    assert moved() - before >= 2**20
    # ... and not what the count itself reads: each count scans every process's /proc entry.
    before = moved()
    for _ in range(50):
        moved()
    assert moved() - before < 64 * 1024, moved() - before
    # A count that fails is no data moving, and the beats go on.
    broken = ProgressBeacon(sent.append, 0, 1, ("algo-1", "node0"), every_s=3600, moved=lambda: 1 / 0)
    broken.beat_now()
    broken.stop()
    assert sent[-1].activity == DONE


def test_a_rank_the_board_has_not_heard_waits_its_silence_and_is_counted_afresh_once_the_group_moved_again(tmp_path):
    """A board restarted empty has heard only some ranks: the verdict waits until a rank has been missing for as
    long as a silent rank must be (three beats and 5 s), then names it; a rank missed before the group made
    progress again is counted from its new absence, not the old one."""
    now, board, answered = [0.0], [[]], []
    watched = Watched(
        failed_through=lambda: 0,
        beats=lambda failed: board[0],
        hang_seen=lambda group, line: answered.append((now[0], line)),
        take_stacks=lambda ranks: {},
        end_ranks=lambda ranks: None,
        clock=lambda: now[0],
    )
    watchdog, wait = Watchdog(watched, ALLOW, [tmp_path]), ALLOW.silent_after_s()
    hung_with_one_missing = [replace(beat(0, idle=70), world_size=2)]  # rank 1 not heard from
    board[0] = hung_with_one_missing
    assert watchdog.check() is None  # rank 1 may simply not have beaten into the new board yet
    board[0] = [replace(beat(r, idle=1), world_size=2) for r in (0, 1)]  # it beats: the group steps again
    now[0] = 100.0
    assert watchdog.check() is None
    board[0] = hung_with_one_missing  # the board restarted again, much later
    now[0] = 101.0
    assert watchdog.check() is None and not answered  # missed one second, not since t=0
    now[0] = 101.0 + wait + 1
    hang = watchdog.check()
    assert hang is not None and hang.missing == [1] and "rank 1 not heard from" in answered[0][1], answered


def test_a_hung_group_is_answered_once_and_forgotten_once_ray_train_failed_it(tmp_path):
    """Each of a thousand restarted groups hangs, is answered once, then fails: the watchdog answers every one and
    keeps what it knows of one group at a time, not of every group the run ever had."""
    now, failed, answered = [0.0], [0], []
    watched = Watched(
        failed_through=lambda: failed[0],
        beats=lambda through: [beat(r, idle=70, attempt=through + 1) for r in (0, 1)],
        hang_seen=lambda group, line: answered.append(group),
        take_stacks=lambda ranks: {},
        end_ranks=lambda ranks: None,
        clock=lambda: now[0],
    )
    watchdog = Watchdog(watched, ALLOW, [tmp_path])
    watchdog_file = tracemalloc.Filter(True, watchdog_module.__file__)
    # What the watchdog itself keeps is measured: pytest keeps every log record of a test, so no record is made.
    logging.disable(logging.CRITICAL)
    tracemalloc.start()
    try:
        held = []  # what the watchdog's own code holds allocated, after 100 groups and after 1,000
        for group in range(1, 1001):
            assert watchdog.check().attempt == group
            assert watchdog.check() is None  # answered once; ended again only long after
            failed[0], now[0] = group, now[0] + 10
            if group in (100, 1000):
                snapshot = tracemalloc.take_snapshot().filter_traces([watchdog_file])
                held.append(sum(stat.size for stat in snapshot.statistics("filename")))
    finally:
        tracemalloc.stop()
        logging.disable(logging.NOTSET)
    assert watchdog.check().attempt == 1001  # the group after the last failed one
    assert answered == list(range(1, 1002))
    # Remembering every group would hold 900 more entries (tens of KB); forgetting them holds the same.
    assert held[1] - held[0] < 4096, held
