"""``--only checkpoints``: loop samples/s of a run that checkpoints every few steps through the keeper, against
LeRobot's own synchronous local save alone, and against no periodic save."""

from __future__ import annotations

from bench.harness import Bench


def run(bench: Bench, every: int = 5) -> None:
    none = bench.raycluster("ckpt-none")
    local = bench.raycluster("ckpt-local", save_freq=every)
    keeper = bench.raycluster("ckpt-keeper", f"--cluster.checkpoint_dir={bench.work / 'root'}", save_freq=every)
    overhead = 1 - keeper["samples_per_s"] / local["samples_per_s"]
    bench.rows += [
        (
            "checkpoints",
            f"loop samples/s, save every {every}",
            local["samples_per_s"],
            keeper["samples_per_s"],
            f"{overhead:+.1%}",
            "keeper < +5% over local",
        ),
        (
            "checkpoints",
            "local save stall vs none",
            none["samples_per_s"],
            local["samples_per_s"],
            f"{1 - local['samples_per_s'] / none['samples_per_s']:+.1%}",
            "(LeRobot's own)",
        ),
    ]
