"""Every rank's word on where it is: the last step it finished and what it does now, sent every few seconds
by a thread of its own to one board on the driver's node, which the watchdog reads.

A beat says how long ago the rank last made progress by the rank's own clock, and the board stamps its
arrival by its own: no two hosts' clocks are compared. A rank that stops beating (stopped by the kernel,
frozen) is told apart from one that beats but makes no progress (waiting in a collective).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, replace

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.lerobot.api import LoopHooks
from raycluster.training.watch.rank_process import BytesMoved, started_at

log = logging.getLogger(__name__)

AGREEING, STARTING, TRAINING, SAVING, VALIDATING, PUBLISHING, DONE = (
    "agreeing on where to start",
    "starting",
    "training",
    "saving a checkpoint",
    "validating",
    "publishing",
    "done",
)
"""What a rank does: each has its own allowance (``watchdog.Allowances``); a rank that is done is not watched."""
MOVING_BYTES_PER_S = 256 * 1024
"""A rank that, with the processes it started, reads or writes at least this fast makes progress, whatever
its step does: a dataset or a pretrained policy downloading before the first step (written to disk), a push to
the Hub after a save or after the last step (read from disk). Log lines stay far below it; a collective's
traffic (send/recv on sockets, NCCL) is not counted, so a hung collective or a stalled loader moves nothing."""


@dataclass(frozen=True)
class Beat:
    rank: int
    attempt: int
    host: str
    node_id: str
    pid: int
    started: float
    """When the rank's process started, in seconds since boot (``started_at``): a pid reused is another process."""
    thread: int
    """The training loop's thread (Ray Train runs it in one of its own): its Python id, which faulthandler
    gives, and its native id, which py-spy gives."""
    native_thread: int
    step: int | None
    """The last step this rank finished; None before its first."""
    activity: str
    idle_s: float
    """Seconds since this rank's last progress (a step finished, the activity began, or data moving at
    ``MOVING_BYTES_PER_S``), as of ``silent_s`` ago."""
    seq: int = 0
    """This rank's beats in the order it made them: one overtaken in flight never replaces a newer one."""
    silent_s: float = 0.0
    """Seconds since the board last heard from this rank (filled in by the board)."""
    world_size: int = 0
    """The ranks of its worker group (0: not said): a rank the board has no beat of is named too."""

    @property
    def idle_now(self) -> float:
        return self.idle_s + self.silent_s

    @property
    def who(self) -> str:
        return f"rank {self.rank} on {self.host} (pid {self.pid})"


class Beats:
    """The board's bookkeeping, apart from Ray: the newest beat of every rank of every worker group. Which groups
    failed is the journal's word, given at each read: a board that Ray restarts loses only beats, which come
    again within seconds, never a failure (a failed group's late beats would otherwise be watched again)."""

    def __init__(self) -> None:
        self._beats: dict[tuple[int, int], tuple[Beat, float]] = {}

    def beat(self, beat: Beat, now: float) -> None:
        held = self._beats.get((beat.attempt, beat.rank))
        if held is None or held[0].seq < beat.seq:
            self._beats[beat.attempt, beat.rank] = (beat, now)

    def newest_attempt(self, now: float, failed_through: int) -> list[Beat]:
        """The beats of the newest group still running, by rank, each with how long it has been silent; groups
        up to ``failed_through`` are over (their beats, and any still in flight, are dropped)."""
        self._beats = {key: held for key, held in self._beats.items() if key[0] > failed_through}
        attempt = max((a for a, _ in self._beats), default=None)
        held = sorted((rank, b, at) for (a, rank), (b, at) in self._beats.items() if a == attempt)
        return [replace(b, silent_s=now - at) for _, b, at in held]


@ray.remote(num_cpus=0)
class ProgressBoard:
    """``Beats`` as an actor on the driver's node, restarted by Ray if its process dies (``board_on_this_node``)."""

    def __init__(self) -> None:
        self._beats = Beats()

    def beat(self, beat: Beat) -> None:
        self._beats.beat(beat, time.monotonic())

    def newest_attempt(self, failed_through: int) -> list[Beat]:
        return self._beats.newest_attempt(time.monotonic(), failed_through)


def rank_whereabouts() -> tuple[str, str]:
    """This rank's host, as SageMaker names it (its IP elsewhere), and its Ray node id."""
    host = os.environ.get("SM_CURRENT_HOST") or ray.util.get_node_ip_address()
    return host, ray.get_runtime_context().get_node_id()


def board_on_this_node():
    """On the driver's node, restarted by Ray if its process dies: its state is lost with it, but the ranks'
    next beats refill it within seconds, and without a board no hang would be seen again."""
    here = ray.get_runtime_context().get_node_id()
    affinity = NodeAffinitySchedulingStrategy(here, soft=False)
    return ProgressBoard.options(scheduling_strategy=affinity, max_restarts=-1).remote()


class ProgressBeacon(LoopHooks):
    """One rank's beats, from the rank's first line: a daemon thread sends the state every ``every_s``; the loop's
    hooks only update it, so a step costs no remote call. ``validates_every``: the steps after which LeRobot
    validates (its own ``--env_eval_freq`` with an env, ``--eval_steps``), which run right after that step."""

    def __init__(
        self,
        send,
        rank: int,
        attempt: int,
        where: tuple[str, str],
        every_s: float | None,
        moved=None,
        clock=time.monotonic,
        process: tuple[int, float] | None = None,
        world_size: int = 0,
    ):
        """``send``: takes a ``Beat`` and must not block (the board's ``beat.remote``); ``where``: this rank's
        host (as SageMaker names it) and Ray node id; ``every_s``: how often its thread beats (None: it has none,
        and its owner calls ``beat_now``, as the simulation in ``raycluster/dsim/hangs.py`` does on its fake
        clock); ``moved``: the bytes this rank has moved so far; ``process``: its pid and start (this one's);
        ``world_size``: the ranks of its group."""
        self.send, self.every_s, self.validates_every, self.clock = send, every_s, (), clock
        self._lock = threading.Lock()
        self._since, self._step_activity, self._seq = clock(), TRAINING, 0
        pid, started = process or (os.getpid(), started_at(os.getpid()))
        self._moved = moved or BytesMoved(pid)
        self._bytes = self._sample(), self._since
        self._stopped = threading.Event()
        loop = threading.get_ident(), threading.get_native_id()  # on the loop's thread
        self._beat = Beat(rank, attempt, *where, pid, started, *loop, None, AGREEING, 0.0, world_size=world_size)
        if every_s is not None:
            threading.Thread(target=self._send_every, name="progress-beacon", daemon=True).start()

    def validating_at(self, validates_every) -> None:
        """Once LeRobot's flags are read: the steps after which it validates."""
        self.validates_every = tuple(n for n in validates_every if n > 0)

    def now(self, activity: str, step: int | None = None) -> None:
        """Progress: ``activity`` begins now (after ``step``, when one was finished)."""
        with self._lock:
            self._since = self.clock()
            self._beat = replace(self._beat, activity=activity, step=self._beat.step if step is None else step)
        if activity == DONE:
            self.beat_now()

    def after_step(self, step: int, loss: float, policy) -> None:
        self._step_activity = VALIDATING if any(step % n == 0 for n in self.validates_every) else TRAINING
        self.now(self._step_activity, step)

    def checkpoint_started(self, step_dir) -> None:
        self.now(SAVING)

    def checkpoint_written(self, step_dir) -> None:
        self.now(self._step_activity)  # every rank that saves: what follows the save on this step (a validation)

    def checkpoint_saved(self, step_dir) -> None:
        self.now(self._step_activity)

    def stop(self) -> None:
        self.now(DONE)
        self._stopped.set()

    def _sample(self) -> int | None:
        """The bytes moved so far; None when they cannot be counted (then nothing counts as moving)."""
        try:
            return self._moved()
        except Exception:  # a count that fails must never stop a beat
            return None

    def beat_now(self) -> None:
        """One beat: where the rank is, and how long since its last progress."""
        moved, now = self._sample(), self.clock()  # outside the lock: the loop's hooks never wait for /proc
        with self._lock:  # numbered and sent in one go: the board keeps the newest it has seen
            (before, then), self._bytes = self._bytes, (moved, now)
            if None not in (moved, before) and now > then and moved - before >= MOVING_BYTES_PER_S * (now - then):
                self._since = now  # data moving is progress
            self._seq += 1
            self.send(replace(self._beat, idle_s=self.clock() - self._since, seq=self._seq))

    def _send_every(self) -> None:
        failed = False
        while not self._stopped.is_set():
            try:
                self.beat_now()
            except Exception as exc:  # one failed send must not end the beats: a silent rank is taken for a hung one
                if not failed:
                    log.warning("rank %d: a progress beat could not be sent (%s); beating on", self._beat.rank, exc)
                failed = True
            self._stopped.wait(self.every_s)


def rank_beacon(board, rank: int, group: int, world_size: int, every_s: float) -> ProgressBeacon:
    """This rank's beacon, beating to ``board`` as worker group ``group`` of ``world_size`` ranks."""
    return ProgressBeacon(board.beat.remote, rank, group, rank_whereabouts(), every_s, world_size=world_size)
