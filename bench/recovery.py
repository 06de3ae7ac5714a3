"""``--only recovery``: from the SIGKILL of a training worker to the first resumed training step, and the
phases of the recovery in between."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

from bench.harness import REPO, Bench
from raycluster.training.phases import RECOVERY
from raycluster.training.summary import read_summary

RECOVERY_STEPS = 40


def run(bench: Bench) -> None:
    cmd = bench.train_cmd(
        "--cluster.max_failures=1",
        f"--cluster.checkpoint_dir={bench.work / 'rec-root'}",
        f"--steps={RECOVERY_STEPS}",
        "--save_freq=5",
        "--log_freq=1",
        f"--output_dir={bench.work / 'rec'}",
    )
    print(f"bench: recovery, rank 1 killed after the first checkpoint ({RECOVERY_STEPS} steps) ...", flush=True)
    started = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=bench.env, cwd=REPO)
    pids, killed, resumed = {}, None, None
    manifest = bench.work / "rec-root" / "checkpoints" / "000005" / "raycluster_manifest.json"
    for line in proc.stdout:
        if m := re.search(r"raycluster worker rank (\d+) of \d+, pid (\d+)", line):
            pids[int(m.group(1))] = int(m.group(2))
        if killed is None and manifest.exists() and 1 in pids:
            os.kill(pids[1], signal.SIGKILL)
            killed, killed_at = time.perf_counter(), time.time() - started
        elif killed is not None and re.search(r"step:\d+ ", line) and "resuming" not in line:
            if resumed is None and time.perf_counter() - killed > 0.5:
                resumed = time.perf_counter()
    proc.wait()
    seconds = (resumed - killed) if killed and resumed else float("nan")
    bench.rows.append(("recovery", "kill -> first resumed step s", float("nan"), seconds, "", "<= 10 s"))
    recoveries = read_summary(bench.work / "rec")["recoveries"] if killed else []
    if recoveries:  # each phase's end, in seconds after the SIGKILL
        bench.recovery_phases = {"SIGKILL": 0.0} | {k: recoveries[0][k] - killed_at for k in RECOVERY}
