"""The progress watchdog: when no rank of the current attempt has made progress for longer than its
activity allows, the group is hung. Every rank's stack is taken on its own node, one line says which ranks
are stuck and where, and the stuck ranks are SIGKILLed: Ray Train then restarts the group as for any worker
failure (one failure against ``--cluster.max_failures``), and it resumes from the newest complete checkpoint.

What it cannot see: a rank inside a GPU kernel that never returns beats on (its beacon is a thread of its
own) but never finishes the step, so it is caught as "no progress"; its Python stack stops at the call into
CUDA, and the kernel itself is not shown.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import ray

from raycluster.training.progress import (
    DONE,
    PUBLISHING,
    SAVING,
    STARTING,
    TRAINING,
    VALIDATING,
    Beat,
    ProgressBoard,
)
from raycluster.training.stacks import stack_taker

log = logging.getLogger(__name__)

SLOW_ACTIVITY_S = 900.0
"""At least this long for a first step (dataset, model, a resumed checkpoint's fetch), a checkpoint save."""
LONG_ACTIVITY_S = 1800.0
"""At least this long for a validation (LeRobot's env rollouts) and the final publish (every host's part)."""
ASK_S = 60.0
"""The longest the watchdog waits for the board or a node's stacks."""


@dataclass(frozen=True)
class Allowances:
    step_s: float
    first_step_s: float
    saving_s: float
    validating_s: float
    publishing_s: float

    @classmethod
    def for_timeout(cls, hang_timeout_s: float) -> Allowances:
        slow, long = max(hang_timeout_s, SLOW_ACTIVITY_S), max(hang_timeout_s, LONG_ACTIVITY_S)
        return cls(hang_timeout_s, slow, slow, long, long)

    def of(self, activity: str) -> float:
        return {
            STARTING: self.first_step_s,
            TRAINING: self.step_s,
            SAVING: self.saving_s,
            VALIDATING: self.validating_s,
            PUBLISHING: self.publishing_s,
        }[activity]

    def beats_every_s(self) -> float:
        return min(5.0, self.step_s / 6)


@dataclass(frozen=True)
class Hang:
    attempt: int
    ranks: list[Beat]
    """Every watched rank, by rank."""
    stuck: list[Beat]
    """The ranks that stopped beating (the kernel stopped them, or they froze); every rank when all beat."""


def find_hang(beats: list[Beat], allowances: Allowances) -> Hang | None:
    """A hang: every watched rank of the newest attempt is past its own activity's allowance."""
    watched = [b for b in beats if b.activity != DONE]
    silent = [b for b in watched if b.silent_s > 3 * allowances.beats_every_s() + 5]
    # A rank at work on a slow activity still beats (its beacon is a thread of its own): one that went silent
    # is not saving or validating any more, and gets a step's allowance whatever it last said.
    if not watched or any(b.idle_now <= allowances.of(TRAINING if b in silent else b.activity) for b in watched):
        return None
    return Hang(watched[0].attempt, watched, silent or watched)


def where(stacks: str, thread: int, native_thread: int) -> str:
    """The training thread's innermost frame, and the innermost of LeRobot's or ours when that is another."""
    frames = loop_frames(stacks, thread, native_thread)
    if not frames:
        return "no stack"
    ours = next((f for f in frames if "lerobot" in f or "raycluster" in f), None)
    return frames[0] if ours in (None, frames[0]) else f"{frames[0]}, from {ours}"


def loop_frames(stacks: str, thread: int, native_thread: int) -> list[str]:
    """The training loop's thread, innermost first: py-spy names threads by native id, faulthandler by
    Python id."""
    lines, frames, inside = stacks.splitlines(), [], False
    for line in lines:
        if line.startswith(("Thread ", "Current thread ", "Process ", "---")):
            if inside and frames:
                break
            inside = line.startswith(f"Thread {native_thread} ") or f"{thread:#018x}" in line
        elif inside and line.strip():
            frames.append(line.strip().removeprefix("File "))
    return frames


def describe(hang: Hang, allowances: Allowances, taken: dict[int, tuple[str, str, str]], stacks_at: str) -> str:
    """One line: which ranks, on which hosts, stuck where; the stacks' file."""
    stuck = {b.rank for b in hang.stuck}
    parts = []
    for beat in hang.ranks:
        state, _, text = taken.get(beat.pid, ("unknown", "none", "the host did not answer"))
        how = "stuck" if beat.rank in stuck else "waiting"
        silent = f", silent {beat.silent_s:.0f}s" if beat.rank in stuck and len(stuck) < len(hang.ranks) else ""
        parts.append(
            f"{beat.who} {how} ({beat.activity}, {state}{silent}) in {where(text, beat.thread, beat.native_thread)}"
        )
    steps = [b.step for b in hang.ranks if b.step is not None]
    after = f"after step {max(steps)}" if steps else "before its first step"
    return (
        f"hang: no rank of attempt {hang.attempt} made progress for {min(b.idle_now for b in hang.ranks):.0f}s "
        f"{after} (--cluster.hang_timeout_s={allowances.step_s:g}): " + "; ".join(parts) + f"; stacks in {stacks_at}"
    )


def stacks_text(hang: Hang, taken: dict[int, tuple[str, str, str]]) -> str:
    blocks = []
    for beat in hang.ranks:
        state, how, text = taken.get(beat.pid, ("unknown", "none", "the host did not answer"))
        blocks.append(f"=== {beat.who}, {beat.activity}, process {state}, stacks by {how}\n{text.rstrip()}\n")
    return "\n".join(blocks)


class Watchdog:
    """The driver's side: reads the board every few seconds while ``done`` is unset, answers each hung
    attempt once. ``report_dirs``: where the stacks' file is written (the summary's directories)."""

    def __init__(self, board, allowances: Allowances, report_dirs: list[Path]):
        self.board, self.allowances, self.report_dirs = board, allowances, report_dirs
        self._answered: set[int] = set()

    def start(self, done: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self._run, args=(done,), name="hang-watchdog", daemon=True)
        thread.start()
        return thread

    def _run(self, done: threading.Event) -> None:
        while not done.wait(self.allowances.beats_every_s()):
            try:
                beats = ray.get(self.board.newest_attempt.remote(), timeout=ASK_S)
            except Exception as exc:  # the driver's own node is going: the run ends anyway
                log.warning("the hang watchdog could not read the ranks' progress: %s", exc)
                continue
            hang = find_hang(beats, self.allowances)
            if hang is not None and hang.attempt not in self._answered:
                self._answered.add(hang.attempt)
                self.answer(hang)

    def answer(self, hang: Hang) -> str:
        """Take the stacks, say where, keep them beside the summary, and end the stuck ranks."""
        nodes = {b.node_id for b in hang.ranks}
        takers = {node: stack_taker(node) for node in nodes}
        asked = {node: takers[node].take.remote([b.pid for b in hang.ranks if b.node_id == node]) for node in nodes}
        taken: dict[int, tuple[str, str, str]] = {}
        for node, ref in asked.items():
            try:
                taken |= ray.get(ref, timeout=ASK_S)
            except Exception as exc:  # a host that cannot answer: its ranks are named without a stack
                log.warning("no stacks from node %s: %s", node, exc)
        name = f"raycluster_hang_attempt{hang.attempt}.txt"
        for directory in self.report_dirs:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(stacks_text(hang, taken))
        line = describe(hang, self.allowances, taken, str(self.report_dirs[0] / name))
        log.error("%s", line)
        log.error("stacks of attempt %d's ranks:\n%s", hang.attempt, stacks_text(hang, taken))
        ray.get(self.board.hang_seen.remote(line), timeout=ASK_S)
        for node in {b.node_id for b in hang.stuck}:
            takers[node].kill.remote([b.pid for b in hang.stuck if b.node_id == node])
        return line


def watch_for_hangs(hang_timeout_s: float, report_dirs: list[Path]) -> tuple | None:
    """The board every rank beats to and the watchdog that reads it; none with --cluster.hang_timeout_s=0."""
    if hang_timeout_s <= 0:
        return None
    board = ProgressBoard.remote()
    return board, Watchdog(board, Allowances.for_timeout(hang_timeout_s), report_dirs)
