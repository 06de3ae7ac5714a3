"""What every part of the bench shares: a work directory, the environment its commands run in (their own HOME,
no Ray auth, no W&B, no Hub), the dataset and tiny ACT every training run uses, how a command is run and timed,
and what the parts found (the table's rows, and the phases each run went through)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from raycluster.demo import TINY_ACT
from raycluster.lerobot.dataset import SyntheticDatasetSpec, make_synthetic_dataset
from raycluster.training.summary import read_summary

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

Row = tuple[str, str, float, float, str, str]
"""part, metric, baseline, raycluster, ratio or difference, goal (a baseline of NaN is printed empty)."""


class Bench:
    def __init__(self, steps: int, workers: int):
        self.steps, self.workers = steps, workers
        self.work = Path(tempfile.mkdtemp(prefix="raycluster-bench-"))
        self.env = {
            **os.environ,
            "HOME": str(self.work),
            "RAY_AUTH_MODE": "disabled",
            "WANDB_MODE": "disabled",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
        spec = SyntheticDatasetSpec(root=self.work / "dataset")
        make_synthetic_dataset(spec)
        self.flags = [
            f"--dataset.repo_id={spec.repo_id}",
            f"--dataset.root={spec.root}",
            *TINY_ACT,
            "--batch_size=4",
            "--num_workers=0",
            "--seed=1",
        ]
        self.rows: list[Row] = []
        self.phases: dict[str, dict[str, float]] = {}
        """Per run (torchrun, local, running): phase -> seconds since its command started."""
        self.recovery_phases: dict[str, float] = {}

    def run(self, cmd: list[str]) -> tuple[float, str]:
        print(
            f"bench: {' '.join(Path(c).name if c.startswith('/') and i == 0 else c for i, c in enumerate(cmd[:5]))} ...",
            flush=True,
        )
        started, self.started_at = time.perf_counter(), time.time()
        result = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=REPO)
        if result.returncode != 0:
            sys.exit(f"benchmark command failed ({result.returncode}): {' '.join(cmd)}\n{result.stderr[-3000:]}")
        return time.perf_counter() - started, result.stdout + result.stderr

    def train_cmd(self, *flags: str) -> list[str]:
        """``raycluster train`` on this bench's workers, dataset and policy, with ``flags`` last (they win)."""
        cmd = [sys.executable, "-m", "raycluster", "train", f"--cluster.num_workers={self.workers}"]
        return [*cmd, *self.flags, *flags]

    def raycluster(self, name: str, *flags: str, steps: int | None = None, save_freq: int | None = None) -> dict:
        steps = steps or self.steps
        wall, out = self.run(
            self.train_cmd(
                f"--steps={steps}",
                f"--save_freq={save_freq or steps}",
                f"--log_freq={steps}",
                f"--output_dir={self.work / name}",
                *flags,
            )
        )
        return {**read_summary(self.work / name), "wall": wall, "output": out}
