"""The SIGTERM a host gets when SageMaker stops the job (or reclaims a spot instance), with the time left
before SageMaker's SIGKILL; and calls bounded by that time: Ray's Jobs API calls have no timeout of their
own, so a dashboard that stops answering would otherwise hold the whole stop."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from raycluster.sagemaker.stop_budget import SIGKILL_AFTER_S

log = logging.getLogger(__name__)


class StopClock:
    """A ``threading.Event`` that also knows when it was first set: every deadline after SIGTERM counts
    from that one moment, not from when each step noticed it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._at: float | None = None

    def set(self) -> None:
        if self._at is None:  # a second SIGTERM does not give more time: SageMaker's SIGKILL is fixed
            self._at = time.monotonic()
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def until(self, mark_s: float) -> float:
        """Seconds until ``mark_s`` after the SIGTERM (a ``StopBudget`` mark); infinite before any SIGTERM."""
        if self._at is None:
            return math.inf
        return mark_s - (time.monotonic() - self._at)

    def left(self) -> float:
        """Seconds until SageMaker's SIGKILL; infinite before any SIGTERM."""
        return self.until(SIGKILL_AFTER_S)


def call_within[T](
    seconds: float, call: Callable[[], T], what: str, stop: StopClock | None = None
) -> tuple[bool, T | None]:
    """``call()`` in a thread of its own, waited for at most ``seconds`` (and no longer once ``stop`` is set):
    (True, its value), or (False, None) when it raised or did not answer in time (logged, naming ``what``). A
    call that hangs is left behind on a daemon thread: this process is about to end anyway."""
    answer: dict[str, object] = {}

    def run() -> None:
        try:
            answer["value"] = call()
        except Exception as exc:  # any failure of the call is the same "no answer" to the caller
            answer["error"] = exc

    thread = threading.Thread(target=run, name=f"bounded-{what}", daemon=True)
    thread.start()
    deadline = time.monotonic() + max(0.0, seconds)
    while thread.is_alive() and time.monotonic() < deadline and not (stop and stop.is_set()):
        thread.join(min(0.2, max(0.0, deadline - time.monotonic())))
    if "value" in answer:
        return True, answer["value"]  # type: ignore[return-value]
    why = answer.get("error") or (
        "stopped by SIGTERM" if stop and stop.is_set() else f"no answer within {seconds:.0f}s"
    )
    log.warning("%s: %s", what, why)
    return False, None


class BoundedCall[T]:
    """``call_within`` for a call made again and again (a status poll): while one call hangs, the next ask waits
    for that same call instead of starting another thread, so a dead service leaks no thread per poll; the
    first unanswered ask is logged, not every one after it."""

    def __init__(self, call: Callable[[], T], what: str):
        self.call, self.what = call, what
        self._thread: threading.Thread | None = None
        self._answer: dict[str, object] = {}
        self._answered = True

    def ask(self, seconds: float) -> tuple[bool, T | None]:
        if self._thread is None:
            self._answer = answer = {}
            self._thread = threading.Thread(target=self._run, args=(answer,), name=f"bounded-{self.what}", daemon=True)
            self._thread.start()
        self._thread.join(max(0.0, seconds))
        why = f"no answer within {seconds:.0f}s (asked again until it answers)" if self._thread.is_alive() else ""
        if not why:
            self._thread, answer = None, self._answer
            if "value" in answer:
                self._answered = True
                return True, answer["value"]  # type: ignore[return-value]
            why = str(answer.get("error"))
        if self._answered:
            log.warning("%s: %s", self.what, why)
        self._answered = False
        return False, None

    def _run(self, answer: dict) -> None:
        try:
            answer["value"] = self.call()
        except Exception as exc:  # any failure of the call is the same "no answer" to the caller
            answer["error"] = exc
