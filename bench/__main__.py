"""``make bench``: raycluster against plain LeRobot on this machine, as a table of ratios.

Each part is a module of its own (``bench/<part>.py``), run by its ``--only`` name:

1. training: the same short run (dataset, tiny ACT, seed, steps, world size 2) under plain torchrun +
   LeRobot's ``train`` and under ``raycluster train``: loop samples/s and end-to-end wall time.
   The same again on LeRobot main (``lerobot-main``), from its wheel in ``../shared/wheels``.
2. checkpoint stall: loop samples/s of a run that checkpoints every few steps through the keeper versus
   LeRobot's own synchronous local save alone (and versus no periodic checkpoint).
   Both on a private cluster (``--cluster.address=local``) and on a running one (``raycluster up``, then
   ``--cluster.address=<its GCS>``: the interactive case), with each run's phases side by side: when LeRobot
   was set up, its first and last step, the command's end (torchrun's from the same hooks in its rank 0),
   and raycluster's own (flags checked, cluster ready, worker group ready, ...) from its summary.
3. recovery: from SIGKILL of a training worker to the first resumed training step, and its phases.
4. interruption: SIGTERM to a run whose periodic saves are far away: the steps lost (the step training had
   reached vs the step a rerun resumes from) and the seconds from SIGTERM to the published checkpoint.
5. validation: the held-out loss every few steps, LeRobot's inline ``--eval_steps`` against raycluster's
   asynchronous ``--cluster.async_eval`` at the same cadence and size: loop samples/s of each against none,
   and the seconds rank 0's loop is blocked per validation (its time between steps beyond the steps' own).
6. sharded-checkpoints: seconds from a sharded save to its complete checkpoint on 2, 4 and 8 simulated hosts
   (``bench/sharded_checkpoints.py``; needs root, as the simulated hosts do), and the commit protocol at 64 hosts
   in the deterministic simulation: saves committed when some or all hosts stage slower than the save interval.
7. hashes: the pace of each checksum a checkpoint's record may name, on one core (``bench/hashes.py``).
8. environment: the job's real requirements over a Python that holds torch, installed from the index by pip (as
   SageMaker's driver would) and as raycluster's hosts install it (uv), and restored from the archive raycluster
   keeps (``bench/environment.py``; needs the package index).

What the parts share (the work directory, the environment, how a run is timed) is ``bench/harness.py``; the
table is printed by ``bench/table.py``.
"""

import argparse
import shutil

from bench import (
    checkpoint_stall,
    curves,
    environment,
    hashes,
    interruption,
    lerobot_main,
    recovery,
    sharded_checkpoints,
    training,
    validation,
    watchdog,
)
from bench.harness import Bench
from bench.table import print_table

PARTS = {
    "training": training,
    "lerobot-main": lerobot_main,
    "curves": curves,
    "watchdog": watchdog,
    "checkpoints": checkpoint_stall,
    "recovery": recovery,
    "interruption": interruption,
    "validation": validation,
    "sharded-checkpoints": sharded_checkpoints,
    "hashes": hashes,
    "environment": environment,
}
"""Each part of the bench by its ``--only`` name: a module of its own whose ``run(bench)`` adds its rows."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", choices=list(PARTS))
    parser.add_argument("--keep", action="store_true", help="keep the work dir (datasets, runs, checkpoints)")
    args = parser.parse_args()
    bench = Bench(args.steps, args.workers)
    try:
        for name, part in PARTS.items():
            if args.only in (None, name):
                part.run(bench)
        print_table(bench)
    finally:
        if args.keep:
            print(f"work dir kept: {bench.work}")
        else:
            shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
