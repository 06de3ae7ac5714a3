"""``make bench``: raycluster against plain LeRobot on this machine, as a table of ratios.

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
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import hashes, sharded_checkpoints
from raycluster.dataset import SyntheticDatasetSpec, make_synthetic_dataset
from raycluster.demo import TINY_ACT
from raycluster.training.phases import RECOVERY, START_UP
from raycluster.training.summary import read_summary

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RECOVERY_STEPS = 40
STEP_TIMES = re.compile(r"step:(\d+) .*?updt_s:([0-9.]+) data_s:([0-9.]+)")
LEROBOT_MAIN_WHEELS = sorted((REPO.parent / "shared" / "wheels").glob("lerobot-*.whl"))


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
        self.rows: list[tuple[str, str, float, float, str, str]] = []
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

    def training(self, part: str = "training") -> None:
        wall, out = self.run(
            [
                str(BIN / "torchrun"),
                f"--nproc-per-node={self.workers}",
                "bench/plain_lerobot.py",
                *self.flags,
                f"--steps={self.steps}",
                f"--save_freq={self.steps}",
                f"--log_freq={self.steps}",
                f"--output_dir={self.work / part / 'plain'}",
            ]
        )
        plain = json.loads(out.split("BENCH ", 1)[1].splitlines()[0]) | {"started": self.started_at}
        ours = self.raycluster(f"{part}/ray")
        if part == "training":
            self.phases["torchrun"] = {k: v - plain["started"] for k, v in plain["at"].items()} | {"exited": wall}
            self.phases["raycluster local"] = ours["phases"] | {"exited": ours["wall"]}
        self.rows += [
            (
                part,
                "loop samples/s",
                plain["samples_per_s"],
                ours["samples_per_s"],
                f"{ours['samples_per_s'] / plain['samples_per_s']:.3f}",
                ">= 0.98",
            ),
            (part, "end-to-end wall s", wall, ours["wall"], f"{ours['wall'] - wall:+.1f} s", "<= +10 s"),
        ]
        if part == "training":
            self.running(wall)

    def running(self, plain_wall: float) -> None:
        """The interactive case: the same run on a cluster that is already up (``raycluster up``)."""
        state, cli, saved = self.work / "up", [sys.executable, "-m", "raycluster"], self.env
        self.run([*cli, "up", f"--state-dir={state}"])
        try:
            cluster = json.loads((state / "cluster.json").read_text())
            self.env = {**saved, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": cluster["token_path"]}
            ours = self.raycluster("running/ray", f"--cluster.address={cluster['address']}")
        finally:
            self.env = saved
            self.run([*cli, "down", f"--state-dir={state}"])
        self.phases["raycluster running"] = ours["phases"] | {"exited": ours["wall"]}
        diff = f"{ours['wall'] - plain_wall:+.1f} s"
        self.rows.append(("running", "end-to-end wall s", plain_wall, ours["wall"], diff, "<= +5 s"))

    def lerobot_main(self) -> None:
        """The training rows again on LeRobot main (its wheel over this environment, as the tests run it):
        plain torchrun + LeRobot main's own ``train`` against ``raycluster train`` on it."""
        if not LEROBOT_MAIN_WHEELS:
            print(f"bench: no LeRobot main wheel in {LEROBOT_MAIN_WHEELS.parent}: the lerobot-main rows are left out")
            return
        overlay = self.work / "lerobot-main-overlay"
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(overlay)]
        subprocess.run([*pip, str(LEROBOT_MAIN_WHEELS[-1])], check=True)
        saved = self.env
        self.env = {**saved, "PYTHONPATH": f"{overlay}{os.pathsep}{REPO}"}
        try:
            self.training("lerobot main")
        finally:
            self.env = saved

    def curves(self) -> None:
        """What recording the curves costs the loop, in its worst case: every step logged."""
        off = self.raycluster("curves-off", "--cluster.track=none", "--log_freq=1")
        on = self.raycluster("curves-on", "--log_freq=1")
        cost = 1 - on["samples_per_s"] / off["samples_per_s"]
        self.rows.append(
            ("curves", "loop samples/s, every step logged", off["samples_per_s"], on["samples_per_s"],
             f"{cost:+.1%}", "< 1% slower")
        )  # fmt: skip

    def watchdog(self) -> None:
        """What the hang watchdog costs the loop: its beacon thread beats every 5 s (every 1 s at the shortest
        timeouts); no remote call per step."""
        off = self.raycluster("watchdog-off", "--cluster.hang_timeout_s=0")
        on = self.raycluster("watchdog-on")
        eager = self.raycluster("watchdog-10s", "--cluster.hang_timeout_s=10")
        for name, run in (("default (beat every 5 s)", on), ("timeout 10 s (beat every 1.7 s)", eager)):
            cost = 1 - run["samples_per_s"] / off["samples_per_s"]
            self.rows.append(
                ("watchdog", f"loop samples/s, {name}", off["samples_per_s"], run["samples_per_s"], f"{cost:+.1%}", "< 1% slower")
            )  # fmt: skip

    def checkpoint_stall(self, every: int = 5) -> None:
        none = self.raycluster("ckpt-none")
        local = self.raycluster("ckpt-local", save_freq=every)
        keeper = self.raycluster("ckpt-keeper", f"--cluster.checkpoint_dir={self.work / 'root'}", save_freq=every)
        overhead = 1 - keeper["samples_per_s"] / local["samples_per_s"]
        self.rows += [
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

    def recovery(self) -> None:
        cmd = self.train_cmd(
            "--cluster.max_failures=1",
            f"--cluster.checkpoint_dir={self.work / 'rec-root'}",
            f"--steps={RECOVERY_STEPS}",
            "--save_freq=5",
            "--log_freq=1",
            f"--output_dir={self.work / 'rec'}",
        )
        print(f"bench: recovery, rank 1 killed after the first checkpoint ({RECOVERY_STEPS} steps) ...", flush=True)
        started = time.time()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env, cwd=REPO
        )
        pids, killed, resumed = {}, None, None
        manifest = self.work / "rec-root" / "checkpoints" / "000005" / "raycluster_manifest.json"
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
        self.rows.append(("recovery", "kill -> first resumed step s", float("nan"), seconds, "", "<= 10 s"))
        recoveries = read_summary(self.work / "rec")["recoveries"] if killed else []
        if recoveries:  # each phase's end, in seconds after the SIGKILL
            self.recovery_phases = {"SIGKILL": 0.0} | {k: recoveries[0][k] - killed_at for k in RECOVERY}

    def interruption(self) -> None:
        root = self.work / "int-root" / "checkpoints"
        cmd = self.train_cmd(
            f"--cluster.checkpoint_dir={root.parent}",
            "--save_freq=100000",
            "--log_freq=1",
            f"--output_dir={self.work / 'int'}",
        )
        print("bench: interruption, SIGTERM after 10 steps, then a rerun ...", flush=True)
        proc = subprocess.Popen(
            [*cmd, "--steps=1000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env, cwd=REPO
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
        rerun = self.raycluster("int", f"--cluster.checkpoint_dir={root.parent}", steps=saved + 1)
        lost = reached - (rerun["resumed_from"] or 0)
        self.rows += [
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

    def validation(self, every: int = 10, steps: int = 40) -> None:
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
            root = f"--cluster.checkpoint_dir={self.work / f'val-{name}-root'}"
            common = ("--dataset.eval_split=0.25", f"--log_freq={every}", "--cluster.cpus_per_worker=0.5", root)
            runs[name] = self.raycluster(f"val-{name}", *common, *flags, steps=steps, save_freq=every)
        validations = steps // every - 1
        lost = {name: (loop_s(run) - loop_s(runs["none"])) / validations for name, run in runs.items()}
        evaluated = sum(e["status"] == "VALIDATED" for e in runs["async"]["evaluations"])
        blocked = {name: (between_steps(run) - between_steps(runs["none"])) / validations for name, run in runs.items()}
        sps = {name: run["samples_per_s"] for name, run in runs.items()}
        ratio = {name: f"{sps[name] / sps['none']:.3f}" for name in sps}
        less = f"{blocked['async'] - blocked['inline']:+.2f} s"
        walls = (runs["inline"]["wall"], runs["async"]["wall"])
        self.rows += [
            ("validation", "loop samples/s vs none: inline", sps["none"], sps["inline"], ratio["inline"], "(LeRobot's)"),
            ("validation", "loop samples/s vs none: async", sps["none"], sps["async"], ratio["async"], "2 cores shared"),
            ("validation", "loop s lost/val: inline|ours", lost["inline"], lost["async"], "CPU shared", "0 on free cores"),
            ("validation", "rank 0 blocked s/val: inline|ours", blocked["inline"], blocked["async"], less, "ours near 0"),
            ("validation", "end-to-end wall s: inline|ours", *walls, f"{evaluated} evaluated", "every checkpoint"),
        ]  # fmt: skip

    def sharded_checkpoints(self) -> None:
        self.rows += sharded_checkpoints.rows(self.work, self.env)

    def hashes(self) -> None:
        self.rows += hashes.rows()

    def print(self) -> None:
        print(
            f"\ntiny ACT, {self.workers} CPU workers, batch 4 per worker; training and checkpoints {self.steps} steps, "
            f"recovery {RECOVERY_STEPS} steps"
        )
        print(f"{'part':<14}{'metric':<34}{'baseline':>10}{'raycluster':>12}{'ratio/diff':>14}  goal")
        for part, metric, base, mine, rel, goal in self.rows:
            base_text = "" if base != base else f"{base:.2f}"
            print(f"{part:<14}{metric:<34}{base_text:>10}{mine:>12.2f}{rel:>14}  {goal}")
        if self.phases:
            print("\nphases, s since the command started (each run's own clock)")
            print(f"{'phase':<28}" + "".join(f"{run:>20}" for run in self.phases))
            for phase in (*START_UP, "exited"):
                cells = (self.phases[run].get(phase) for run in self.phases)
                print(f"{phase:<28}" + "".join(f"{'' if c is None else f'{c:.1f}':>20}" for c in cells))
        if self.recovery_phases:
            print(
                "\nrecovery, s after the SIGKILL: " + ", ".join(f"{k} {v:.1f}" for k, v in self.recovery_phases.items())
            )


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--only",
        choices=[
            "training",
            "lerobot-main",
            "curves",
            "watchdog",
            "checkpoints",
            "recovery",
            "interruption",
            "validation",
            "sharded-checkpoints",
            "hashes",
        ],
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dir (datasets, runs, checkpoints)")
    args = parser.parse_args()
    bench = Bench(args.steps, args.workers)
    try:
        for part, run in (
            ("training", bench.training),
            ("lerobot-main", bench.lerobot_main),
            ("curves", bench.curves),
            ("watchdog", bench.watchdog),
            ("checkpoints", bench.checkpoint_stall),
            ("recovery", bench.recovery),
            ("interruption", bench.interruption),
            ("validation", bench.validation),
            ("sharded-checkpoints", bench.sharded_checkpoints),
            ("hashes", bench.hashes),
        ):
            if args.only in (None, part):
                run()
        bench.print()
    finally:
        if args.keep:
            print(f"work dir kept: {bench.work}")
        else:
            shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
