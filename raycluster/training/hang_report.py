"""What the watchdog says of a hang: one line naming the stuck ranks and where each is (the waiting ones
summed up by where they wait: at 512 ranks a line per rank would be a page), and every rank's stacks."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from raycluster.training.progress import Beat

NO_ANSWER = ("unknown", "none", "the host did not answer")
SPELLED_OUT = 4
"""Waiting ranks in one place named one by one up to this many; beyond, counted."""


@dataclass(frozen=True)
class Hang:
    attempt: int
    ranks: list[Beat]
    """Every watched rank, by rank."""
    stuck: list[Beat]
    """The ranks that stopped beating (the kernel stopped them, or they froze); every rank when all beat."""


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
    frames, inside = [], False
    for line in stacks.splitlines():
        if line.startswith(("Thread ", "Current thread ", "Process ", "---")):
            if inside and frames:
                break
            inside = line.startswith(f"Thread {native_thread} ") or f"{thread:#018x}" in line
        elif inside and line.strip():
            frames.append(line.strip().removeprefix("File "))
    return frames


def describe(hang: Hang, step_s: float, taken: dict[int, tuple[str, str, str]], stacks_at: str) -> str:
    """One line: which ranks, on which hosts, stuck where; where the others wait; the stacks' file."""
    stuck = {b.rank for b in hang.stuck}
    told_apart = len(stuck) < len(hang.ranks)
    parts, waiting = [], defaultdict(list)
    for beat in hang.ranks:
        state, _, text = taken.get(beat.pid, NO_ANSWER)
        at = where(text, beat.thread, beat.native_thread)
        if beat.rank in stuck:
            silent = f", silent {beat.silent_s:.0f}s" if told_apart else ""
            parts.append(f"{beat.who} {'stuck' if told_apart else 'hung'} ({beat.activity}, {state}{silent}) in {at}")
        else:
            waiting[beat.activity, state, at].append(beat)
    for (activity, state, at), beats in waiting.items():
        if len(beats) <= SPELLED_OUT:
            parts += [f"{b.who} waiting ({activity}, {state}) in {at}" for b in beats]
        else:
            hosts = len({b.host for b in beats})
            parts.append(f"{len(beats)} more ranks on {hosts} hosts waiting ({activity}, {state}) in {at}")
    steps = [b.step for b in hang.ranks if b.step is not None]
    after = f"after step {max(steps)}" if steps else "before its first step"
    idle = min(b.idle_now for b in hang.ranks)
    return (
        f"hang: no rank of attempt {hang.attempt} made progress for {idle:.0f}s {after} "
        f"(--cluster.hang_timeout_s={step_s:g}): " + "; ".join(parts) + f"; stacks in {stacks_at}"
    )


def stacks_text(beats: list[Beat], taken: dict[int, tuple[str, str, str]]) -> str:
    blocks = []
    for beat in beats:
        state, how, text = taken.get(beat.pid, NO_ANSWER)
        blocks.append(f"=== {beat.who}, {beat.activity}, process {state}, stacks by {how}\n{text.rstrip()}\n")
    return "\n".join(blocks)


def shown_in_the_log(hang: Hang, taken: dict[int, tuple[str, str, str]]) -> list[Beat]:
    """The stuck ranks, and the first of the waiting ranks in each place: the file has every rank's."""
    stuck, seen, shown = {b.rank for b in hang.stuck}, set(), []
    for beat in hang.ranks:
        at = where(taken.get(beat.pid, NO_ANSWER)[2], beat.thread, beat.native_thread)
        if beat.rank in stuck or at not in seen:
            shown.append(beat)
            seen.add(at)
    return shown
