"""Every rank's word on where it is: the last step it finished and what it does now, sent every few seconds
by a thread of its own to one board on the driver's node, which the watchdog reads.

A beat says how long ago the rank last made progress by the rank's own clock, and the board stamps its
arrival by its own: no two hosts' clocks are compared. A rank that stops beating (stopped by the kernel,
frozen) is told apart from one that beats but makes no progress (waiting in a collective).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace

import ray

from raycluster.training.lerobot_api import LoopHooks

STARTING, TRAINING, SAVING, VALIDATING, PUBLISHING, DONE = (
    "starting",
    "training",
    "saving a checkpoint",
    "validating",
    "publishing",
    "done",
)
"""What a rank does: each has its own allowance (``watchdog.Allowances``); a rank that is done is not watched."""


@dataclass(frozen=True)
class Beat:
    rank: int
    attempt: int
    host: str
    node_id: str
    pid: int
    thread: int
    """The training loop's thread (Ray Train runs it in one of its own): its Python id, which faulthandler
    gives, and its native id, which py-spy gives."""
    native_thread: int
    step: int | None
    """The last step this rank finished; None before its first."""
    activity: str
    idle_s: float
    """Seconds since this rank's last progress (a step finished, or the activity began), as of ``silent_s`` ago."""
    silent_s: float = 0.0
    """Seconds since the board last heard from this rank (filled in by the board)."""

    @property
    def idle_now(self) -> float:
        return self.idle_s + self.silent_s

    @property
    def who(self) -> str:
        return f"rank {self.rank} on {self.host} (pid {self.pid})"


@ray.remote(num_cpus=0)
class ProgressBoard:
    """The newest beat of every rank of every attempt; outlives worker-group restarts, as the journal does."""

    def __init__(self) -> None:
        self._beats: dict[tuple[int, int], tuple[Beat, float]] = {}
        self._failed: set[int] = set()
        self._hangs: list[str] = []

    def beat(self, beat: Beat) -> None:
        self._beats[beat.attempt, beat.rank] = (beat, time.monotonic())

    def attempt_failed(self) -> None:
        """Ray Train saw the newest attempt fail: a restart (or the run's end) follows."""
        if self._beats:
            self._failed.add(max(a for a, _ in self._beats))

    def newest_attempt(self) -> list[Beat]:
        """The beats of the newest attempt, each with how long it has been silent; none once it failed."""
        attempt = max((a for a, _ in self._beats), default=None)
        if attempt is None or attempt in self._failed:
            return []
        now = time.monotonic()
        return [replace(b, silent_s=now - at) for (a, _), (b, at) in sorted(self._beats.items()) if a == attempt]

    def hang_seen(self, line: str) -> None:
        self._hangs.append(line)

    def hangs(self) -> list[str]:
        return list(self._hangs)


class ProgressBeacon(LoopHooks):
    """One rank's beats: a daemon thread sends the state every ``every_s``; the loop's hooks only update it,
    so a step costs no remote call. ``eval_every``: LeRobot's own validation steps (``--eval_steps``,
    ``--env_eval_freq``), which run right after the step they follow."""

    def __init__(self, board, rank: int, attempt: int, every_s: float, eval_every: tuple[int, ...] = ()):
        self.board, self.every_s, self.eval_every = board, every_s, tuple(n for n in eval_every if n > 0)
        self._lock = threading.Lock()
        self._since = time.monotonic()
        self._stopped = threading.Event()
        host = os.environ.get("SM_CURRENT_HOST") or ray.util.get_node_ip_address()
        node_id = ray.get_runtime_context().get_node_id()
        loop = threading.get_ident(), threading.get_native_id()  # made on the loop's own thread
        self._beat = Beat(rank, attempt, host, node_id, os.getpid(), *loop, None, STARTING, 0.0)
        threading.Thread(target=self._send_every, name="progress-beacon", daemon=True).start()

    def now(self, activity: str, step: int | None = None) -> None:
        """Progress: ``activity`` begins now (after ``step``, when one was finished)."""
        with self._lock:
            self._since = time.monotonic()
            self._beat = replace(self._beat, activity=activity, step=self._beat.step if step is None else step)
        if activity == DONE:
            self._send()

    def after_step(self, step: int, loss: float, policy) -> None:
        validates = any(step % n == 0 for n in self.eval_every)
        self.now(VALIDATING if validates else TRAINING, step)

    def checkpoint_started(self, step_dir) -> None:
        self.now(SAVING)

    def checkpoint_saved(self, step_dir) -> None:
        self.now(TRAINING)

    def stop(self) -> None:
        self.now(DONE)
        self._stopped.set()

    def _send(self) -> None:
        with self._lock:
            beat = replace(self._beat, idle_s=time.monotonic() - self._since)
        self.board.beat.remote(beat)  # fire and forget: the board being slow never slows the rank

    def _send_every(self) -> None:
        while not self._stopped.is_set():
            self._send()
            self._stopped.wait(self.every_s)
