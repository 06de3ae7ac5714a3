"""Stopping a run on a signal at a step every rank agrees on, with LeRobot's own checkpoint of that step.

The driver is told (SIGTERM from SageMaker through Ray's job stop, Ctrl-C locally) and records it in the
run's journal. Rank 0 polls the journal in the background, and after every optimizer step all ranks
all-reduce "asked" (MAX): they all see it after the same step N. LeRobot's ``should_save_checkpoint`` then
answers yes at N, so LeRobot saves N exactly as a periodic save (and resumes it unchanged), the keeper
publishes it as any other, and the next step raises ``Interrupted`` on every rank before any collective.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

import ray
import torch
import torch.distributed as dist

from raycluster.lerobot.api import LoopHooks

log = logging.getLogger(__name__)

POLL_S = 0.1
ASK_S = 30.0
"""The longest one call to the journal may take: a journal that does not answer is asked again."""


class Interrupted(Exception):
    """Raised on every rank at the step after the agreed one, once LeRobot has saved that one."""

    def __init__(self, step: int):
        super().__init__(f"stopped after step {step}")
        self.step = step


class StopRequest:
    """SIGTERM or Ctrl-C asks the run to save and stop; a second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.asked_at: float | None = None
        """``time.monotonic()`` of the first signal."""
        self._asked = threading.Event()

    def listen(self) -> None:
        """Take SIGINT and SIGTERM (main thread only). Called once connected: ``ray.init`` makes SIGTERM
        exit the driver at once, which would lose the step being trained."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame) -> None:
        if self.signal == signal.SIGINT and signum == signal.SIGINT:
            raise KeyboardInterrupt
        log.warning(
            "%s: saving the current step, then stopping%s",
            signal.Signals(signum).name,
            " (Ctrl-C again to stop at once)" if signum == signal.SIGINT else "",
        )
        self.ask(signum)

    def ask(self, signum: int) -> None:
        if self.signal is None:
            self.signal, self.asked_at = signum, time.monotonic()
            self._asked.set()

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else ""

    def wait(self, timeout: float) -> bool:
        return self._asked.wait(timeout)


def forward_to_journal(stop: StopRequest, journal, done: threading.Event) -> threading.Thread:
    """Pass the driver's stop request on to every rank (through the journal, which outlives restarts)."""

    def run() -> None:
        while not done.is_set():
            if stop.wait(POLL_S):
                try:
                    ray.get(journal.request_stop.remote(stop.name), timeout=ASK_S)
                    return
                except ray.exceptions.GetTimeoutError:
                    log.warning("the run's journal did not take the stop request within %.0fs; asking again", ASK_S)

    thread = threading.Thread(target=run, name="stop-forwarder", daemon=True)
    thread.start()
    return thread


class StopAgreement(LoopHooks):
    """One rank's side of agreeing on the stop step. Only rank 0 polls the journal: the per-step all-reduce
    (MAX) carries its answer to every other rank, so the journal sees one caller, not one per GPU."""

    def __init__(self, journal, device: torch.device, polls: bool):
        self.device = device
        self.stop_at: int | None = None
        self._asked = threading.Event()
        self._done = threading.Event()
        if polls:
            threading.Thread(target=self._poll, args=(journal,), name="stop-poller", daemon=True).start()

    def _poll(self, journal) -> None:
        while not self._done.is_set() and not self._asked.is_set():
            try:
                if ray.get(journal.stop_requested.remote(), timeout=ASK_S):
                    self._asked.set()
            except ray.exceptions.GetTimeoutError:
                log.warning("the run's journal did not answer within %.0fs; asking again", ASK_S)
            self._done.wait(POLL_S)

    def before_step(self) -> None:
        if self.stop_at is not None:
            raise Interrupted(self.stop_at)

    def after_step(self, step: int, loss: float, policy) -> None:
        # One tiny collective per step: a rank that stopped alone would leave the others hanging.
        asked = torch.tensor([int(self._asked.is_set())], device=self.device)
        dist.all_reduce(asked, op=dist.ReduceOp.MAX)
        if asked.item() and self.stop_at is None:
            self.stop_at = step

    def save_now(self, step: int) -> bool:
        return step == self.stop_at

    def close(self) -> None:
        self._done.set()


def fit_listening(trainer, stop: StopRequest):
    """``trainer.fit()`` in a thread of its own, while this (main) thread takes the signals: from the main
    thread, Ray Train would make Ctrl-C abort the run without a save."""
    stop.listen()
    outcome: dict = {}

    def fit() -> None:
        try:
            outcome["result"] = trainer.fit()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    # A daemon thread: a second Ctrl-C must not wait for it at exit.
    fitting = threading.Thread(target=fit, name="fit", daemon=True)
    fitting.start()
    # As long as training lasts, on purpose: the hang watchdog, Ray Train's max_failures and, on SageMaker, the
    # head's stop budget bound it; the short joins only keep Ctrl-C heard.
    while fitting.is_alive():
        fitting.join(0.5)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
