"""``--only lerobot-main``: the training rows again on LeRobot main, from its wheel in ``../shared/wheels``."""

from __future__ import annotations

import os
import subprocess
import sys

from bench import training
from bench.harness import REPO, Bench

LEROBOT_MAIN_WHEELS = sorted((REPO.parent / "shared" / "wheels").glob("lerobot-*.whl"))


def run(bench: Bench) -> None:
    """The training rows again on LeRobot main (its wheel over this environment, as the tests run it):
    plain torchrun + LeRobot main's own ``train`` against ``raycluster train`` on it."""
    if not LEROBOT_MAIN_WHEELS:
        print(f"bench: no LeRobot main wheel in {LEROBOT_MAIN_WHEELS.parent}: the lerobot-main rows are left out")
        return
    overlay = bench.work / "lerobot-main-overlay"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(overlay)]
    subprocess.run([*pip, str(LEROBOT_MAIN_WHEELS[-1])], check=True)
    saved = bench.env
    bench.env = {**saved, "PYTHONPATH": f"{overlay}{os.pathsep}{REPO}"}
    try:
        training.run(bench, "lerobot main")
    finally:
        bench.env = saved
