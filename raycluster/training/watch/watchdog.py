"""The progress watchdog: when no rank of the current attempt has made progress for longer than its
activity allows, the group is hung. Every rank's stack is taken on its own node, one line says which ranks
are stuck and where, and the stuck ranks are SIGKILLed: Ray Train then restarts the group as for any worker
failure (one failure against ``--cluster.max_failures``), and it resumes from the newest complete checkpoint.

What it cannot see: a rank inside a GPU kernel that never returns beats on (its beacon is a thread of its
own) but never finishes the step, so it is caught as "no progress"; its Python stack stops at the call into
CUDA, and the kernel itself is not shown. A group none of whose ranks reaches its first line (where the beacon
starts) is not on the board: Ray Train bounds that set-up itself (actors 60 s, rendezvous 30 min).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ray

from raycluster.training.watch.hang_report import Hang, describe, shown_in_the_log, stacks_text
from raycluster.training.watch.progress import (
    AGREEING,
    DONE,
    PUBLISHING,
    SAVING,
    STARTING,
    TRAINING,
    VALIDATING,
    Beat,
    board_on_this_node,
)
from raycluster.training.watch.stacks import stack_taker

log = logging.getLogger(__name__)

SLOW_ACTIVITY_S = 900.0
"""At least this long for a first step (dataset, model, a resumed checkpoint's fetch), a checkpoint save."""
LONG_ACTIVITY_S = 1800.0
"""At least this long for a validation (LeRobot's env rollouts), the final publish (every host's part), and a
rank's start up to the attempt agreed: LeRobot imported, then the resume path's own deadlines one after another
(the keeper's answer 60 s, a publish the failed attempt left 300 s, the check of the checkpoint taken 900 s)."""
SAY_AGAIN_S = 600.0
"""A watchdog that cannot check says so again this often while it lasts."""
ASK_S = 60.0
"""The longest the watchdog waits for the board or for every node's stacks."""
KILL_AGAIN_AFTER_S = 120.0
"""A hung attempt still hung this long after its ranks were ended is ended again (a kill that did not land)."""


@dataclass(frozen=True)
class Allowances:
    step_s: float
    first_step_s: float
    saving_s: float
    validating_s: float
    publishing_s: float
    agreeing_s: float

    @classmethod
    def for_timeout(cls, hang_timeout_s: float) -> Allowances:
        slow, long = max(hang_timeout_s, SLOW_ACTIVITY_S), max(hang_timeout_s, LONG_ACTIVITY_S)
        return cls(hang_timeout_s, slow, slow, long, long, long)

    def of(self, activity: str) -> float:
        return {
            AGREEING: self.agreeing_s,
            STARTING: self.first_step_s,
            TRAINING: self.step_s,
            SAVING: self.saving_s,
            VALIDATING: self.validating_s,
            PUBLISHING: self.publishing_s,
        }[activity]

    def beats_every_s(self) -> float:
        return min(5.0, max(1.0, self.step_s / 6))

    def silent_after_s(self) -> float:
        """A rank not heard from for this long has stopped beating (three beats lost, and some slack)."""
        return 3 * self.beats_every_s() + 5


def find_hang(beats: list[Beat], allowances: Allowances) -> Hang | None:
    """A hang: every watched rank of the newest attempt is past its own activity's allowance, or has been
    silent for longer than a step's (stopped or frozen, it is not saving or validating any more; a rank at
    work on a slow activity still beats, its beacon being a thread of its own)."""
    watched = [b for b in beats if b.activity != DONE]
    long_silent = max(allowances.step_s, allowances.silent_after_s())
    if not watched or any(b.idle_now <= allowances.of(b.activity) and b.silent_s <= long_silent for b in watched):
        return None
    silent = [b for b in watched if b.silent_s > allowances.silent_after_s()]
    heard = {b.rank for b in beats}
    missing = [rank for rank in range(max(b.world_size for b in beats)) if rank not in heard]
    return Hang(watched[0].attempt, watched, silent or watched, missing)


@dataclass(frozen=True)
class Watched:
    """What the watchdog reads and does, as plain calls: through Ray (``watch_for_hangs``: the run's journal, the
    board, every node's stack taker), or the simulation's (``raycluster/dsim/hangs.py``), which drives the very
    same ``Watchdog`` with a fake clock."""

    failed_through: Callable[[], int]
    """The newest worker group Ray Train saw fail (the journal's word)."""
    beats: Callable[[int], list[Beat]]
    """The newest running group's beats, past the groups failed through the number given (the board's)."""
    hang_seen: Callable[[int, str], None]
    """A hang's line, kept with its group's number (the journal's, for the failure's reason)."""
    take_stacks: Callable[[list[Beat]], dict[int, tuple[str, str, str]]]
    end_ranks: Callable[[list[Beat]], None]
    clock: Callable[[], float] = time.monotonic


class Watchdog:
    """The driver's side: reads the board every few seconds while ``done`` is unset, answers each hung
    attempt once (and ends its ranks again if it is still hung long after). ``report_dirs``: where the
    stacks' file is written (the summary's directories, the one SageMaker keeps first)."""

    def __init__(self, watched: Watched, allowances: Allowances, report_dirs: list[Path]):
        self.watched, self.allowances, self.report_dirs = watched, allowances, report_dirs
        self._answered: dict[int, float] = {}
        """Group -> when its hang was last answered; only groups Ray Train has not failed yet."""
        self._unheard_since: dict[int, float] = {}
        """Group -> since when a hang of it has had ranks the board holds no beat of."""

    def start(self, done: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(done,), name="hang-watchdog", daemon=True)
        thread.start()
        return thread

    def _run(self, done: threading.Event) -> None:
        failed, said_at = 0, None
        while not done.wait(self.allowances.beats_every_s()):
            try:
                self.check()
            except Exception as exc:  # the watchdog must outlive any failure of its own, or no hang is ever caught
                failed += 1
                # Said at once (with the traceback the first time), then once every SAY_AGAIN_S while it lasts:
                # a check every few seconds would otherwise log thousands of tracebacks a day.
                if said_at is None or self.watched.clock() - said_at > SAY_AGAIN_S:
                    log.warning(
                        "the hang watchdog cannot check (%d failed checks): %s; no hang is seen until it can",
                        failed,
                        exc,
                        exc_info=said_at is None,
                    )
                    said_at = self.watched.clock()
                continue
            if failed:
                log.info("the hang watchdog checks again, after %d failed checks", failed)
            failed, said_at = 0, None

    def check(self) -> Hang | None:
        """One look at the board: the hang answered now, if any."""
        watched = self.watched
        failed = watched.failed_through()
        # A group Ray Train failed is never watched again: forgotten, so a thousand restarts keep one group's worth.
        self._answered = {attempt: at for attempt, at in self._answered.items() if attempt > failed}
        hang = find_hang(watched.beats(failed), self.allowances)
        # A failure Ray Train saw between the two reads ended that group: it is over, not hung.
        if hang is None or hang.attempt <= watched.failed_through():
            self._unheard_since.clear()  # a rank missed before a group made progress again is counted afresh
            return None
        if not self._unheard_long_enough(hang):
            return None
        answered = self._answered.get(hang.attempt)
        if answered is None:
            self._answered[hang.attempt] = watched.clock()
            self.answer(hang)
            return hang
        if watched.clock() - answered > KILL_AGAIN_AFTER_S:
            self._answered[hang.attempt] = watched.clock()
            log.error(
                "attempt %d is still hung %.0fs after its ranks were ended: ending them again",
                hang.attempt,
                KILL_AGAIN_AFTER_S,
            )
            watched.end_ranks(hang.stuck)
            return hang
        return None

    def _unheard_long_enough(self, hang: Hang) -> bool:
        """A rank the board holds no beat of counts as silent from the moment the watchdog first missed it. A board
        that Ray restarted empty hears every live rank again within a few beats: until a rank has been missing for
        as long as a silent rank must be, the hang waits, so that a culprit that beats is named by its place."""
        if not hang.missing:
            self._unheard_since.pop(hang.attempt, None)
            return True
        since = self._unheard_since.setdefault(hang.attempt, self.watched.clock())
        return self.watched.clock() - since > self.allowances.silent_after_s()

    def answer(self, hang: Hang) -> None:
        """Take the stacks, say where, keep them beside the summary; whatever of that fails, end the stuck ranks."""
        try:
            taken = self.watched.take_stacks(hang.ranks)
            name = f"raycluster_hang_attempt{hang.attempt}.txt"
            line = describe(hang, self.allowances.step_s, taken, str(self.report_dirs[0] / name))
            log.error("%s", line)
            log.error("stacks (every rank's in %s):\n%s", name, stacks_text(shown_in_the_log(hang, taken), taken))
            self.watched.hang_seen(hang.attempt, line)
            for directory in self.report_dirs:
                directory.mkdir(parents=True, exist_ok=True)
                (directory / name).write_text(stacks_text(hang.ranks, taken))
        finally:
            self.watched.end_ranks(hang.stuck)


def take_stacks(ranks: list[Beat]) -> dict[int, tuple[str, str, str]]:
    """pid -> (process state, how taken, stacks), from every node at once, within ``ASK_S`` in all."""
    nodes = {b.node_id for b in ranks}
    asked = [stack_taker(node).take.remote([b.pid for b in ranks if b.node_id == node]) for node in nodes]
    ready, late = ray.wait(asked, num_returns=len(asked), timeout=ASK_S)
    if late:
        log.warning("%d of %d nodes gave no stacks within %.0fs", len(late), len(asked), ASK_S)
    taken: dict[int, tuple[str, str, str]] = {}
    for ref in ready:
        try:
            taken |= ray.get(ref)
        except Exception as exc:  # a node that cannot answer: its ranks are named without a stack
            log.warning("no stacks from a node: %s", exc)
    return taken


def end_ranks(ranks: list[Beat]) -> None:
    """SIGKILL each (its process's start time checked against the beat's: never a reused pid) on its node;
    Ray Train then sees its workers die and restarts the group."""
    nodes = {b.node_id for b in ranks}
    ended = [stack_taker(node).kill.remote([(b.pid, b.started) for b in ranks if b.node_id == node]) for node in nodes]
    _, late = ray.wait(ended, num_returns=len(ended), timeout=ASK_S)
    if late:
        log.warning("%d of %d nodes did not confirm the end of their hung ranks in %.0fs", len(late), len(ended), ASK_S)


def watch_for_hangs(hang_timeout_s: float, report_dirs: list[Path], journal) -> tuple | None:
    """The board every rank beats to and the watchdog that reads it (with the run's journal, which says which
    groups failed and keeps the hangs it saw); none with --cluster.hang_timeout_s=0."""
    if hang_timeout_s <= 0:
        return None
    board = board_on_this_node()
    watched = Watched(
        failed_through=lambda: ray.get(journal.failed_through.remote(), timeout=ASK_S),
        beats=lambda failed_through: ray.get(board.newest_attempt.remote(failed_through), timeout=ASK_S),
        hang_seen=lambda attempt, line: ray.get(journal.hang_seen.remote(attempt, line), timeout=ASK_S),
        take_stacks=take_stacks,
        end_ranks=end_ranks,
    )
    return board, Watchdog(watched, Allowances.for_timeout(hang_timeout_s), report_dirs)
