"""The head's stop path: one clock from the first SIGTERM, and calls that cannot hold it."""

import threading
import time

from raycluster.sagemaker.stop_budget import SIGKILL_AFTER_S
from raycluster.sagemaker.stop_clock import StopClock, within


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
    assert within(0.5, hang.wait, "a hung call") == (False, None)
    assert time.monotonic() - started < 2
    assert within(1, lambda: 1 / 0, "a failing call") == (False, None)
    assert within(1, lambda: "RUNNING", "a call") == (True, "RUNNING")
    hang.set()
