"""A job's log as the head shows it: Ray's tail while the job runs, the driver's log file once it has ended."""

import threading

from raycluster.submission import REST_LINES, FollowedLog


def test_an_ended_jobs_last_lines_come_from_its_log_file_once_each(tmp_path):
    shown: list[str] = []
    followed = FollowedLog(shown.append)
    followed.show("step:1 loss:2.0")  # what Ray's tail brought while the job ran
    followed.show("step:2 loss:1.5")
    # The driver's file as Ray writes it: a progress bar's carriage returns are line ends to Ray's tail as well.
    log_file = tmp_path / "job-driver-raycluster-1.log"
    log_file.write_text("step:1 loss:2.0\nstep:2 loss:1.5\nsaving\r10%\r100%\nerror: the last line, no newline")
    followed.finish(log_file, timeout=0)
    assert shown == ["step:1 loss:2.0", "step:2 loss:1.5", "saving", "10%", "100%", "error: the last line, no newline"]
    followed.show("saving")  # the tail, a few seconds late: shown already
    assert len(shown) == 6


def test_with_no_log_file_here_the_tail_brings_the_last_lines(tmp_path):
    shown: list[str] = []
    followed = FollowedLog(shown.append)
    arrived = threading.Event()

    def tail():
        followed.show("the last line")
        arrived.set()

    followed.thread = threading.Thread(target=tail)
    followed.thread.start()
    followed.finish(tmp_path / "not-on-this-node.log", timeout=5)
    assert arrived.is_set() and shown == ["the last line"]
    followed.show("a later line")  # the tail goes on: nothing was read from a file
    assert shown == ["the last line", "a later line"]


def test_a_tail_that_reached_the_end_showed_everything_and_a_long_rest_shows_its_last_lines(tmp_path):
    shown: list[str] = []
    followed = FollowedLog(shown.append)
    followed.show("one")
    followed.complete = True  # Ray's tail ended with the job: the file has nothing more to give
    log_file = tmp_path / "job-driver-raycluster-2.log"
    log_file.write_text("one\r\ntwo\n")  # what the file's own reading would count otherwise
    followed.finish(log_file, timeout=0)
    assert shown == ["one"]
    # A tail that broke early, far from the end: the last REST_LINES lines, and where the rest is.
    shown.clear()
    followed = FollowedLog(shown.append)
    log_file.write_text("".join(f"line {n}\n" for n in range(REST_LINES + 500)))
    followed.finish(log_file, timeout=0)
    assert shown[0] == f"(500 lines not shown here: the job's whole log is {log_file})"
    assert shown[1:] == [f"line {n}" for n in range(500, REST_LINES + 500)]
