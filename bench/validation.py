"""``--only validation``: the held-out loss every few steps, LeRobot's inline ``--eval_steps`` against
raycluster's asynchronous ``--cluster.async_eval`` at the same cadence and size: loop samples/s of each against
none, and the seconds rank 0's loop is blocked per validation (its time between steps beyond the steps' own)."""

from __future__ import annotations

import re

from bench.harness import Bench

STEP_TIMES = re.compile(r"step:(\d+) .*?updt_s:([0-9.]+) data_s:([0-9.]+)")


def run(bench: Bench, every: int = 10, steps: int = 40) -> None:
    """Held-out loss every ``every`` steps (a quarter of the episodes held out), none / LeRobot inline / ours.
    Every run saves every ``every`` through the keeper and gives Ray's count of CPUs half a CPU per worker (ours
    runs its tasks on the rest): the runs differ in their validation only. The last step's validation comes
    after the loop's end (LeRobot's and ours): ``steps // every - 1`` of them are inside it."""
    runs = {}
    for name, flags in (
        ("none", ()),
        ("inline", (f"--eval_steps={every}",)),
        ("async", ("--cluster.async_eval=true",)),
    ):
        root = f"--cluster.checkpoint_dir={bench.work / f'val-{name}-root'}"
        common = ("--dataset.eval_split=0.25", f"--log_freq={every}", "--cluster.cpus_per_worker=0.5", root)
        runs[name] = bench.raycluster(f"val-{name}", *common, *flags, steps=steps, save_freq=every)
    validations = steps // every - 1
    lost = {name: (loop_s(run) - loop_s(runs["none"])) / validations for name, run in runs.items()}
    evaluated = sum(e["status"] == "VALIDATED" for e in runs["async"]["evaluations"])
    blocked = {name: (between_steps(run) - between_steps(runs["none"])) / validations for name, run in runs.items()}
    sps = {name: run["samples_per_s"] for name, run in runs.items()}
    ratio = {name: f"{sps[name] / sps['none']:.3f}" for name in sps}
    less = f"{blocked['async'] - blocked['inline']:+.2f} s"
    walls = (runs["inline"]["wall"], runs["async"]["wall"])
    bench.rows += [
        ("validation", "loop samples/s vs none: inline", sps["none"], sps["inline"], ratio["inline"], "(LeRobot's)"),
        ("validation", "loop samples/s vs none: async", sps["none"], sps["async"], ratio["async"], "2 cores shared"),
        ("validation", "loop s lost/val: inline|ours", lost["inline"], lost["async"], "CPU shared", "0 on free cores"),
        ("validation", "rank 0 blocked s/val: inline|ours", blocked["inline"], blocked["async"], less, "ours near 0"),
        ("validation", "end-to-end wall s: inline|ours", *walls, f"{evaluated} evaluated", "every checkpoint"),
    ]


def loop_s(run: dict) -> float:
    """Rank 0's loop from the end of its first step to the end of its last (what ``samples_per_s`` spans)."""
    return (run["final_step"] - 1) * run["effective_batch_size"] / run["samples_per_s"]


def between_steps(run: dict) -> float:
    """Seconds of rank 0's loop spent outside its steps' own data and update time: logging, saving, validating.
    LeRobot logs each interval's mean ``updt_s`` and ``data_s`` every ``--log_freq`` steps; the first step's own
    time is counted too, the same in every run, so differences between runs leave it out."""
    means = {int(m[1]): float(m[2]) + float(m[3]) for m in STEP_TIMES.finditer(run["output"])}
    logged = sorted(means)
    spent = sum(means[step] * (step - before) for before, step in zip([0, *logged], logged, strict=False))
    return loop_s(run) - spent
