"""What the watchdog says of a hang: one line naming the stuck ranks and where each is, bounded at any scale
(the ranks in one place counted, not listed: at 512 ranks a line per rank would be a page), and every rank's
stacks."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from raycluster.training.watch.progress import Beat

NO_ANSWER = ("unknown", "none", "the host did not answer")
SPELLED_OUT = 4
"""Ranks in one place named one by one up to this many; beyond, counted."""
MAX_PARTS = 12
"""Parts of the line at most; the ranks of any others are counted together."""
LINE_CHARS = 1000
"""The line's length at most, the stacks' file always in it: SageMaker keeps 1,024 characters of a failure."""
Place = tuple[str, str, str, str]
"""(stuck, hung or waiting; activity; process state; innermost frame)."""


@dataclass(frozen=True)
class Hang:
    attempt: int
    ranks: list[Beat]
    """Every watched rank, by rank."""
    stuck: list[Beat]
    """The ranks that stopped beating (the kernel stopped them, or they froze); every rank when all beat."""
    missing: list[int] = field(default_factory=list)
    """Ranks of the group the board has no beat of: a board that Ray restarted lost theirs, and a rank stopped
    before that never beats again (the likely culprit), or a rank never came as far as its first beat."""


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
    """One line, bounded at any scale: the stacks' file first (a FailureReason keeps 1,024 characters), then
    the ranks by place, the odd ones first. Where every rank still beats, each counts as hung, and the rank
    alone in its place (in its data loader while 511 wait in a collective) is the one to look at."""
    steps = [b.step for b in hang.ranks if b.step is not None]
    after = f"after step {max(steps)}" if steps else "before its first step"
    idle = min(b.idle_now for b in hang.ranks)
    head = (
        f"hang: no rank of attempt {hang.attempt} made progress for {idle:.0f}s {after} "
        f"(--cluster.hang_timeout_s={step_s:g}; stacks in {stacks_at}): "
    )
    parts = [*unheard(hang.missing)]
    parts += [part for place, beats in odd_first(ranks_by_place(hang, taken)) for part in named(*place, beats)]
    # As many parts as MAX_PARTS and LINE_CHARS allow (frames can be long paths), the ranks of the rest counted.
    for shown in range(len(parts), -1, -1):
        rest = sum(count for _, count in parts[shown:])
        line = head + "; ".join(
            [text for text, _ in parts[:shown]] + ([f"{rest} more ranks elsewhere"] if rest else [])
        )
        if shown + bool(rest) <= MAX_PARTS and len(line) <= LINE_CHARS:
            return line
    return line


def unheard(missing: list[int]) -> list[tuple[str, int]]:
    """The ranks the board never heard from, first: each by number up to ``SPELLED_OUT``; beyond, counted."""
    if not missing:
        return []
    if len(missing) > SPELLED_OUT:
        return [(f"{len(missing)} ranks not heard from (no beat on the board)", len(missing))]
    ranks = ", ".join(map(str, missing))
    return [(f"{'rank' if len(missing) == 1 else 'ranks'} {ranks} not heard from (no beat on the board)", len(missing))]


def ranks_by_place(hang: Hang, taken: dict[int, tuple[str, str, str]]) -> dict[Place, list[Beat]]:
    """(stuck/hung/waiting, activity, process state, innermost frame) -> the ranks there, in rank order."""
    stuck = {b.rank for b in hang.stuck}
    told_apart = len(stuck) < len(hang.ranks)
    places: dict[Place, list[Beat]] = defaultdict(list)
    for beat in hang.ranks:
        state, _, text = taken.get(beat.pid, NO_ANSWER)
        kind = ("stuck" if told_apart else "hung") if beat.rank in stuck else "waiting"
        places[kind, beat.activity, state, where(text, beat.thread, beat.native_thread)].append(beat)
    return places


def odd_first(places: dict[Place, list[Beat]]) -> list[tuple[Place, list[Beat]]]:
    """The stuck before the waiting, then the fewest ranks in a place first."""
    return sorted(places.items(), key=lambda item: (item[0][0] == "waiting", len(item[1])))


def named(kind: str, activity: str, state: str, at: str, beats: list[Beat]) -> list[tuple[str, int]]:
    """(text, ranks it covers): each rank of a place by name up to ``SPELLED_OUT``; beyond, counted."""
    if len(beats) > SPELLED_OUT:
        silent = f", silent {min(b.silent_s for b in beats):.0f}s or more" if kind == "stuck" else ""
        hosts = len({b.host for b in beats})
        return [(f"{len(beats)} ranks on {hosts} hosts {kind} ({activity}, {state}{silent}) in {at}", len(beats))]
    return [
        (f"{b.who} {kind} ({activity}, {state}{f', silent {b.silent_s:.0f}s' if kind == 'stuck' else ''}) in {at}", 1)
        for b in beats
    ]


def stacks_text(beats: list[Beat], taken: dict[int, tuple[str, str, str]]) -> str:
    blocks = []
    for beat in beats:
        state, how, text = taken.get(beat.pid, NO_ANSWER)
        blocks.append(f"=== {beat.who}, {beat.activity}, process {state}, stacks by {how}\n{text.rstrip()}\n")
    return "\n".join(blocks)


def shown_in_the_log(hang: Hang, taken: dict[int, tuple[str, str, str]]) -> list[Beat]:
    """The first rank of each place (stuck ones and waiting ones apart), of the places the line names first,
    in rank order: the file has every rank's stacks, the log a bounded few."""
    firsts = [beats[0] for _, beats in odd_first(ranks_by_place(hang, taken))[:MAX_PARTS]]
    return sorted(firsts, key=lambda b: b.rank)
