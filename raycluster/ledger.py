"""Where a job's seconds went, across its starts: ``raycluster_ledger.json`` beside the checkpoints, so that a
restarted job (a spot job's next start, a job run again on the same checkpoints) finds it with them and
continues it, one entry per start, and the job's goodput: the time spent on steps that were kept, over the
whole time.

Each start's parts follow one another without a gap, from the start's beginning (on SageMaker the container's,
before SageMaker's driver installs anything; otherwise the command's) to its summary, so they add up to its
wall time by construction:

- ``environment``: the job's environment restored, kept or installed (``raycluster/environment``), as the head host
  took it (0 for a local ``raycluster train``);
- ``before_command``: the rest of the time up to the training command: SageMaker's driver, the entry point, the
  Ray cluster forming, the job's submission (0 for a local ``raycluster train``);
- ``start_up``: the command up to its first step: LeRobot's flags, Ray Train's worker group, agreeing on where to
  start, LeRobot's set-up;
- ``training``: the first step to the last, less the recoveries and the checkpoints;
- ``checkpoints``: the time the loop was blocked saving a checkpoint between two steps (rank 0's ``save_checkpoint``
  to its return; the publishing that follows runs beside training and costs it nothing; the save after the last step
  is the teardown's);
- ``recovery``: from each failure Ray Train saw to the restarted group's first step;
- ``evaluation``: the evaluations still running when training returned, waited for (those that ran beside
  training cost it no wall time: they are in ``training``);
- ``teardown``: the rest of the last step to the summary: the final checkpoint and model, Ray's shutdown.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

LEDGER_NAME = "raycluster_ledger.json"
PARTS = (
    "environment",
    "before_command",
    "start_up",
    "training",
    "checkpoints",
    "recovery",
    "evaluation",
    "teardown",
)


@dataclass(frozen=True)
class StartEntry:
    started_at: float
    """When this start began (seconds since the epoch)."""
    wall_s: float
    parts: dict[str, float]
    """``PARTS``, in seconds; they add up to ``wall_s``."""
    first_step: int | None
    """The step this start resumed from (0: from scratch); None when no worker group of it agreed on one."""
    last_step: int | None
    """The last step this start finished (``first_step`` when it finished none)."""
    steps_trained: int
    """Steps this start's worker groups finished, a step redone after a restart counted each time."""
    steps_redone: int
    """Of those, steps trained again by a later worker group of this start (the steps between the checkpoint it
    resumed from and the failure)."""


@dataclass(frozen=True)
class AttemptSteps:
    """One worker group's steps: the step it resumed from and the last it finished (its rank 0's word)."""

    resumed_from: int
    reached: int
    checkpoints_s: float = 0.0
    """The seconds its loop was blocked saving checkpoints between two steps."""


def process_started(pid: int | str = "self") -> float:
    """When process ``pid`` began (time.time()): for this process, the command's start, its interpreter's imports
    included, as a user's stopwatch counts it; for PID 1, the container's. From the process's start in clock
    ticks since boot (Linux), to 10 ms; psutil's create_time rests on the boot time in whole seconds, up to 1 s
    off."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return psutil.Process(None if pid == "self" else int(pid)).create_time()
    age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age


def start_entry(
    started_at: float,
    command_started: float,
    phases: dict[str, float],
    recoveries: list[dict],
    attempts: list,
    environment_s: float = 0.0,
) -> StartEntry:
    """This start's entry from the run's timeline (``phases`` and ``recoveries``, in seconds since the command
    started, as the summary has them), its worker groups' steps (``AttemptSteps``, oldest first) and the seconds
    its environment took before the command."""
    before = max(0.0, command_started - started_at)
    environment = min(environment_s, before)
    end = phases["summary_written"]
    # A first group that failed before its first step: the training began with the next group's.
    resumed = [r["first_resumed_step"] for r in recoveries if "first_resumed_step" in r]
    first = phases.get("first_step", min(resumed, default=end))
    last = max(first, phases.get("last_step", first))
    # Each recovery's own span within the training (one that never ended lies past the last step: teardown).
    recovery = sum(
        max(0.0, min(last, r["first_resumed_step"]) - max(first, r["failure_seen"]))
        for r in recoveries
        if "failure_seen" in r and "first_resumed_step" in r
    )
    checkpoints = min(sum(a.checkpoints_s for a in attempts), last - first - recovery)
    waited = phases["evaluations_done"] - phases["training_returned"] if "evaluations_done" in phases else 0.0
    evaluation = min(max(0.0, waited), end - last)
    parts = {
        "environment": environment,
        "before_command": before - environment,
        "start_up": first,
        "training": last - first - recovery - checkpoints,
        "checkpoints": checkpoints,
        "recovery": recovery,
        "evaluation": evaluation,
        "teardown": end - last - evaluation,
    }
    trained = sum(max(0, a.reached - a.resumed_from) for a in attempts)
    return StartEntry(
        started_at=round(started_at, 3),
        wall_s=round(before + end, 2),
        parts={name: round(seconds, 2) for name, seconds in parts.items()},
        first_step=attempts[0].resumed_from if attempts else None,
        last_step=attempts[-1].reached if attempts else None,
        steps_trained=trained,
        # What the groups trained beyond the start's own progress was trained twice, whichever group redid it.
        steps_redone=max(0, trained - (attempts[-1].reached - attempts[0].resumed_from)) if attempts else 0,
    )


@dataclass(frozen=True)
class Ledger:
    starts: list[StartEntry] = field(default_factory=list)

    def with_start(self, entry: StartEntry) -> Ledger:
        return Ledger([*self.starts, entry])

    @property
    def steps_redone(self) -> int:
        """Within each start, and between starts: what a start finished beyond the step the next resumed from."""
        trained = [s for s in self.starts if s.last_step is not None]
        between = sum(max(0, a.last_step - b.first_step) for a, b in itertools.pairwise(trained))
        return sum(s.steps_redone for s in self.starts) + between

    @property
    def goodput(self) -> float:
        """The training time of the steps kept (each step of the model once), over the whole wall time."""
        wall = sum(s.wall_s for s in self.starts)
        trained = sum(s.steps_trained for s in self.starts)
        if not wall or not trained:
            return 0.0
        kept = max(0, trained - self.steps_redone)
        return round(sum(s.parts["training"] for s in self.starts) * kept / trained / wall, 4)

    def as_dict(self) -> dict:
        return {"starts": [asdict(s) for s in self.starts], "steps_redone": self.steps_redone, "goodput": self.goodput}

    def line(self) -> str:
        # An entry kept before a part existed counts none of it.
        totals = {name: sum(s.parts.get(name, 0.0) for s in self.starts) for name in PARTS}
        spent = ", ".join(f"{name.replace('_', ' ')} {seconds:.1f}" for name, seconds in totals.items())
        return (
            f"ledger: {len(self.starts)} start(s), {sum(s.wall_s for s in self.starts):.1f}s in all: {spent}; "
            f"{self.steps_redone} step(s) redone; goodput {self.goodput:.2f}"
        )


def ledger_path(checkpoint_dir: str, output_dir: Path) -> Path:
    """Beside the checkpoints: in the checkpoint root when it is a directory (``/opt/ml/checkpoints/...`` on
    SageMaker, which restores it at a restart), else in the output dir (an S3 root or none)."""
    if checkpoint_dir and not checkpoint_dir.startswith("s3://"):
        return Path(checkpoint_dir) / LEDGER_NAME
    return output_dir / LEDGER_NAME


def ledger_of(kept: dict) -> Ledger:
    """The ledger from what ``Ledger.as_dict`` wrote; raises on anything else."""
    ledger = Ledger([StartEntry(**start) for start in kept["starts"]])
    ledger.line()  # every figure there, and a number
    return ledger


def read_ledger(path: Path) -> Ledger:
    """The ledger kept at ``path``; an empty one when there is none. One that cannot be read is moved aside
    (kept, never deleted) and the job goes on with a new one: it is the job's bookkeeping, not its training."""
    if not path.exists():
        return Ledger()
    try:
        return ledger_of(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
        os.replace(path, aside)
        log.warning("the ledger %s could not be read (%s): kept as %s, a new one begins", path, exc, aside.name)
        return Ledger()


def write_ledger(path: Path, ledger: Ledger, scratch: Path | None = None) -> None:
    """Whole or not at all: a start stopped while writing leaves the previous ledger. Written in ``scratch``
    first when given (on the same filesystem, outside what SageMaker syncs, which must never see a partial
    file), else beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = (scratch or path.parent) / f".{path.name}.partial"
    partial.write_text(json.dumps(ledger.as_dict(), indent=2) + "\n")
    os.replace(partial, path)


def keep_start(path: Path, entry: StartEntry, scratch: Path | None = None) -> dict | None:
    """This start added to the ledger kept at ``path`` (a new one when there is none) and said in one line: the
    ledger as the summary has it. What cannot be kept is said, and the run, which trained, ends as it would: the
    ledger is its bookkeeping (None)."""
    try:
        ledger = read_ledger(path).with_start(entry)
        write_ledger(path, ledger, scratch)
    except OSError as exc:
        log.warning("the job's ledger %s could not be kept (%s): this start is not in it", path, exc)
        return None
    log.info("%s (kept in %s)", ledger.line(), path)
    return ledger.as_dict()
