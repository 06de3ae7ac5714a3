"""The head's stop path: one clock from the first SIGTERM, and calls that cannot hold it."""

import threading
import time

import pytest

from raycluster.sagemaker.stop_budget import SIGKILL_AFTER_S
from raycluster.sagemaker.stop_clock import BoundedCall, StopClock, call_within


def test_the_time_left_counts_from_the_first_sigterm_only():
    clock = StopClock()
    assert clock.left() == float("inf") and not clock.is_set()
    clock.set()
    time.sleep(0.3)
    clock.set()  # a second SIGTERM gives no more time: SageMaker's SIGKILL does not move
    assert clock.is_set() and SIGKILL_AFTER_S - 1 < clock.left() <= SIGKILL_AFTER_S - 0.3


def test_a_call_that_hangs_or_raises_is_no_answer_within_its_bound():
    hang = threading.Event()
    started = time.monotonic()
    assert call_within(0.5, hang.wait, "a hung call") == (False, None)
    assert time.monotonic() - started < 2
    assert call_within(1, lambda: 1 / 0, "a failing call") == (False, None)
    assert call_within(1, lambda: "RUNNING", "a call") == (True, "RUNNING")
    hang.set()


def test_a_bounded_call_is_given_up_at_once_on_sigterm():
    # The head's submission to a dashboard that takes connections and never answers: a SIGTERM ends the wait.
    hang, clock = threading.Event(), StopClock()
    threading.Timer(0.3, clock.set).start()
    started = time.monotonic()
    assert call_within(60, hang.wait, "submitting the job", stop=clock) == (False, None)
    assert time.monotonic() - started < 2
    assert call_within(60, lambda: "submitted", "submitting the job", stop=StopClock()) == (True, "submitted")
    hang.set()


def test_a_poll_of_a_hung_service_waits_on_the_one_call_in_flight_and_takes_its_late_answer():
    release, calls = threading.Event(), []

    def status() -> str:
        calls.append(1)
        release.wait()
        return "RUNNING"

    poll = BoundedCall(status, "the job's status")
    for _ in range(5):  # the head polls every second while the Jobs API hangs
        assert poll.ask(0.05) == (False, None)
    polling = [t for t in threading.enumerate() if t.name == "bounded-the job's status"]
    assert len(calls) == 1 and len(polling) == 1  # one thread, not one per poll
    release.set()
    assert poll.ask(1) == (True, "RUNNING")
    assert poll.ask(1) == (True, "RUNNING") and len(calls) == 2  # answered: the next ask is a new call


def test_the_time_until_a_budget_mark_counts_from_the_sigterm():
    clock = StopClock()
    assert clock.until(77) == float("inf")
    clock.set()
    assert 76 < clock.until(77) <= 77 and clock.left() - clock.until(77) == pytest.approx(SIGKILL_AFTER_S - 77)
