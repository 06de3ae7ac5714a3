"""Same short training (dataset, policy, seed, steps, world size 2) under plain torchrun + lerobot-train
and under ``raycluster train``; prints loop throughput, end-to-end wall time and their ratios."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from raycluster.dataset import SyntheticDatasetSpec, make_synthetic_dataset
from raycluster.demo import TINY_ACT
from raycluster.training.summary import read_summary

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"benchmark command failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-3000:]}")
    return wall, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="raycluster-bench-"))
    env = {**os.environ, "HOME": str(work), "RAY_AUTH_MODE": "disabled", "WANDB_MODE": "disabled",
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    spec = SyntheticDatasetSpec(root=work / "dataset")
    make_synthetic_dataset(spec)
    flags = [
        f"--dataset.repo_id={spec.repo_id}", f"--dataset.root={spec.root}", *TINY_ACT,
        f"--steps={args.steps}", "--batch_size=4", "--num_workers=0", "--seed=1",
        f"--save_freq={args.steps}", f"--log_freq={args.steps}",
    ]
    bin_dir = Path(sys.executable).parent
    plain_wall, plain_out = timed(
        [str(bin_dir / "torchrun"), f"--nproc-per-node={args.workers}", "bench/plain_lerobot.py", *flags,
         f"--output_dir={work}/plain"], env)
    plain = json.loads(plain_out.split("BENCH ", 1)[1].splitlines()[0])
    ray_wall, _ = timed(
        [sys.executable, "-m", "raycluster", "train", f"--cluster.num_workers={args.workers}", *flags,
         f"--output_dir={work}/ray"], env)
    ours = read_summary(work / "ray")

    rows = [
        ("loop samples/s", plain["samples_per_s"], ours["samples_per_s"], ours["samples_per_s"] / plain["samples_per_s"], ">= 0.98"),
        ("end-to-end wall s", plain_wall, ray_wall, ray_wall - plain_wall, "<= +10 s"),
    ]
    print(f"\nACT tiny, {args.workers} CPU workers, {args.steps} steps, batch 4 per worker")
    print(f"{'metric':<20}{'torchrun':>12}{'raycluster':>12}{'ratio/diff':>12}  goal")
    for name, base, mine, rel, goal in rows:
        print(f"{name:<20}{base:>12.2f}{mine:>12.2f}{rel:>+12.3f}  {goal}" if "wall" in name
              else f"{name:<20}{base:>12.2f}{mine:>12.2f}{rel:>12.3f}  {goal}")


if __name__ == "__main__":
    main()
