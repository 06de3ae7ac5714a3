"""``--only interruption``: SIGTERM to a run whose periodic saves are far away: the steps lost (the step training
had reached against the step a rerun resumes from) and the seconds from SIGTERM to the published checkpoint."""

from __future__ import annotations

import re
import signal
import subprocess
import time

from bench.harness import REPO, Bench


def run(bench: Bench) -> None:
    root = bench.work / "int-root" / "checkpoints"
    cmd = bench.train_cmd(
        f"--cluster.checkpoint_dir={root.parent}",
        "--save_freq=100000",
        "--log_freq=1",
        f"--output_dir={bench.work / 'int'}",
    )
    print("bench: interruption, SIGTERM after 10 steps, then a rerun ...", flush=True)
    proc = subprocess.Popen(
        [*cmd, "--steps=1000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=bench.env, cwd=REPO
    )
    reached = 0
    for line in proc.stdout:
        if m := re.search(r"step:(\d+) ", line):
            reached = int(m.group(1))
            if reached >= 10:
                break
    proc.send_signal(signal.SIGTERM)
    signalled = time.perf_counter()
    while not any(root.glob("*/raycluster_manifest.json")) and proc.poll() is None:
        time.sleep(0.05)
    published = time.perf_counter() - signalled
    proc.communicate()
    exited = time.perf_counter() - signalled
    saved = int(min(root.iterdir()).name) if root.is_dir() and any(root.iterdir()) else 0
    rerun = bench.raycluster("int", f"--cluster.checkpoint_dir={root.parent}", steps=saved + 1)
    lost = reached - (rerun["resumed_from"] or 0)
    bench.rows += [
        ("interrupt", "steps lost at SIGTERM", float("nan"), float(max(lost, 0)), f"exit {proc.returncode}", "0-1"),
        (
            "interrupt",
            "SIGTERM -> checkpoint published s",
            float("nan"),
            published,
            f"exit at {exited:.1f}s",
            "< 45 s",
        ),
    ]
