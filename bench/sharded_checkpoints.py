"""``make bench ARGS="--only sharded-checkpoints"``: how long a sharded checkpoint takes to become complete on 2, 4
and 8 simulated hosts (network namespaces, SageMaker's own driver) with the same bytes per host. The parts travel
in parallel, each host into its own root: the seconds should not grow with the host count (a funnel's do).

Each host's one rank saves real DCP shards plus ``PAYLOAD_MB`` of optimizer-like state, through raycluster's own
shipping, part stores and keeper (``tests/jobs/sharded_checkpoints.py``); rank 0 waits for each checkpoint to be
complete and prints the seconds since every rank's save returned. The keeper says how long after the last
part's arrival it wrote the record: the protocol's own share (placing and recording), apart from each host's
staging (copy and hash), which on this machine's 2 cores all simulated hosts share.

First, with no hosts started: the protocol's pace at 64 hosts in ``raycluster.dsim`` (saves committed of 200
when 8 or all 64 hosts stage at 1.05-1.5 save intervals, beside the most any protocol could commit), and the S3
bytes each of 4 hosts reads to resume from an S3 root, over the bytes it assembles (``bench/s3_reads.py``).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench import s3_reads
from raycluster.dsim.checkpoints import paced_commits
from raycluster.dsim.profile import slow_hosts

HOSTS = (2, 4, 8)
PAYLOAD_MB = 48
CHECKPOINTS = 4
JOB = Path(__file__).resolve().parent.parent / "tests" / "jobs" / "sharded_checkpoints.py"


def seconds_to_complete(work: Path, hosts: int, env: dict) -> tuple[list[float], str]:
    """Each checkpoint's seconds from the save to complete, and the job's word on what was not published."""
    workdir = work / f"sharded-{hosts}"
    workdir.mkdir(parents=True)
    hps = {"entry__job": "jobs/sharded_checkpoints.py", "workers": hosts, "steps": CHECKPOINTS}
    (workdir / "hps.json").write_text(json.dumps({**hps, "payload_mb": PAYLOAD_MB, "wait_each": True}))
    command = [sys.executable, "-m", "raycluster", "sim", f"--workdir={workdir}", f"--hosts={hosts}"]
    command += [f"--hyperparameters={workdir / 'hps.json'}", f"--include={JOB}"]
    print(f"bench: sharded checkpoints on {hosts} simulated hosts ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    log = (workdir / "algo-1" / "log.txt").read_text() if (workdir / "algo-1" / "log.txt").exists() else ""
    if done.returncode != 0:
        sys.exit(f"sharded-checkpoints bench on {hosts} hosts failed ({done.returncode}):\n{log[-3000:]}")
    seconds = [float(s) for s in re.findall(r"checkpoint \d+: complete ([\d.]+)s after its save", log)]
    protocol = [float(s) for s in re.findall(r"published checkpoint \d+ .*, ([\d.]+)s after its last", log)]
    return seconds, protocol, re.search(r"not published: (.*)", log).group(1)


def simulated_rows() -> list[tuple[str, str, float, float, str, str]]:
    """The commit protocol at 64 hosts in the deterministic simulation: saves committed of 200 when 8 hosts or
    every host stage at 1.05-1.5 save intervals, beside the most any protocol could commit."""
    table, ratios = [], []
    for label, count in (("some", 8), ("all", 64)):
        committed, best = paced_commits(64, slow_hosts(64, count))
        ratios.append(committed / best)
        table.append(
            (
                "sharded",
                f"commits_64_{label}_slow (of 200; the most possible {best})",
                float("nan"),
                committed,
                f"{committed / best:.2f}",
                "",
            )
        )
    return [*table, ("sharded", "commit_efficiency_64", float("nan"), min(ratios), f"{min(ratios):.2f}", ">= 0.9")]


def rows(work: Path, env: dict) -> list[tuple[str, str, float, float, str, str]]:
    """The bench's table rows: the median over each run's checkpoints after the first (which pays warm-up)."""
    whole, own, table = {}, {}, [*simulated_rows(), *s3_reads.rows(work, env)]
    for hosts in HOSTS:
        seconds, protocol, lost = seconds_to_complete(work, hosts, env)
        if len(seconds) != CHECKPOINTS or len(protocol) != CHECKPOINTS or lost != "{}":
            sys.exit(f"sharded-checkpoints bench on {hosts} hosts: {len(seconds)} complete, not published: {lost}")
        whole[hosts], own[hosts] = statistics.median(seconds[1:]), statistics.median(protocol[1:])
        table += [
            ("sharded", f"save -> complete, {hosts} hosts x {PAYLOAD_MB} MB", float("nan"), whole[hosts], "", ""),
            ("sharded", f"  of it last part -> record, {hosts} hosts", float("nan"), own[hosts], "", ""),
        ]
    ratio, protocol_ratio = whole[8] / whole[2], own[8] / own[2]
    return [
        *table,
        ("sharded", "ratio_8_to_2 (2 shared cores)", float("nan"), ratio, f"{ratio:.2f}", "<= 1.5"),
        (
            "sharded",
            "ratio_8_to_2, last part -> record",
            float("nan"),
            protocol_ratio,
            f"{protocol_ratio:.2f}",
            "<= 1.5",
        ),
    ]


def run(bench) -> None:
    """The bench's part: its rows added to the table."""
    bench.rows += rows(bench.work, bench.env)
