"""The bench's table, printed: one row per measure (baseline, raycluster, their ratio or difference, the goal),
then the phases of the runs that recorded them."""

from __future__ import annotations

from bench.harness import Bench
from bench.recovery import RECOVERY_STEPS
from raycluster.training.phases import START_UP


def print_table(bench: Bench) -> None:
    """The table of rows, then each run's phases and the recovery's, where the parts measured them."""
    print(
        f"\ntiny ACT, {bench.workers} CPU workers, batch 4 per worker; training and checkpoints {bench.steps} steps, "
        f"recovery {RECOVERY_STEPS} steps"
    )
    print(f"{'part':<14}{'metric':<34}{'baseline':>10}{'raycluster':>12}{'ratio/diff':>14}  goal")
    for part, metric, base, mine, rel, goal in bench.rows:
        base_text = "" if base != base else f"{base:.2f}"
        print(f"{part:<14}{metric:<34}{base_text:>10}{mine:>12.2f}{rel:>14}  {goal}")
    if bench.phases:
        print("\nphases, s since the command started (each run's own clock)")
        print(f"{'phase':<28}" + "".join(f"{run:>20}" for run in bench.phases))
        for phase in (*START_UP, "exited"):
            cells = (bench.phases[run].get(phase) for run in bench.phases)
            print(f"{phase:<28}" + "".join(f"{'' if c is None else f'{c:.1f}':>20}" for c in cells))
    if bench.recovery_phases:
        print("\nrecovery, s after the SIGKILL: " + ", ".join(f"{k} {v:.1f}" for k, v in bench.recovery_phases.items()))
