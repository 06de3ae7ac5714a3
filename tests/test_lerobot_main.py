"""LeRobot main (its next release: ``train(cfg)``, ``--parallelism.*``) through raycluster, as an overlay of its
wheel over this environment. Skipped, saying why, where the wheel is not at hand (a clone without shared/)."""

import json
import os
import re
import signal
import subprocess
import sys
from importlib.metadata import version

import pytest

from conftest import COMMON, REPO, TINY_ACT, TINY_ACT_HPS, dataset_flags, logged_losses, recorded_rows, run_cli
from raycluster.checkpoints.manifest import MANIFEST
from raycluster.training.summary import read_summary
from simulated import assert_clean


def test_the_lerobot_facing_tests_pass_against_lerobot_main(lerobot_main):
    """The in-process tests of every LeRobot touch point and of the planning, run again under LeRobot main."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_lerobot_api.py"],
        cwd=REPO,
        env={**os.environ, **lerobot_main},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and "skipped" not in result.stdout, result.stdout[-2000:]


@pytest.mark.slow
def test_ddp_on_lerobot_main_survives_a_killed_worker_saves_on_ctrl_c_and_resumes(dataset, lerobot_main, tmp_path):
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    flags = [
        "--cluster.num_workers=2",
        f"--cluster.checkpoint_dir={ckpt}",
        *dataset_flags(dataset),
        *TINY_ACT,
        *COMMON,
        "--save_freq=5",
        "--log_freq=1",
        f"--output_dir={out}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "raycluster", "train", *flags, "--cluster.max_failures=1", "--steps=1000"],
        cwd=REPO,
        env={**os.environ, **lerobot_main},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, pids, killed, restarted = [], {}, None, False
        for line in proc.stdout:
            output.append(line)
            if m := re.search(r"raycluster worker rank (\d+) of 2, pid (\d+)", line):
                pids[int(m.group(1))] = int(m.group(2))
                restarted = killed is not None
            if killed is None and (ckpt / "checkpoints" / "000005" / MANIFEST).exists() and 1 in pids:
                os.kill(pids[1], signal.SIGKILL)
                killed = pids[1]
            if restarted and re.search(r"step:\d+ ", line):  # the new worker group trains: Ctrl-C, as a user would
                proc.send_signal(signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    text = "".join(output) + rest
    assert proc.returncode == 130, text[-4000:]
    step = int(re.search(r"stopped by SIGINT at step (\d+); checkpoint \d+ saved", text).group(1))
    summary = read_summary(out)
    assert summary["restarts"] == 1 and summary["resumed_from"] >= 5 and summary["final_step"] == step
    assert summary["world_size"] == 2 and summary["policy_wrapper"] == "DistributedDataParallel"
    assert summary["mixed_precision"] == "no" and step in summary["checkpoints"]
    first = logged_losses(text)

    rerun = run_cli("train", *flags, f"--steps={step + 15}", env=lerobot_main)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = read_summary(out)
    assert summary["resumed_from"] == step and summary["final_step"] == step + 15
    assert summary["checkpoints"][-1] == step + 15
    assert summary["loss_last"] < sum(first[s] for s in range(1, 6)) / 5, (summary, first)  # the loss fell
    # The curves hold every logged step of both runs, with main's own new timings among LeRobot's numbers.
    rows = {row["step"]: row for row in recorded_rows(out)["out"] if "loss" in row}
    assert set(range(1, step + 16)) <= set(rows) and "step_s" in rows[step + 15], sorted(rows)


@pytest.mark.slow
def test_lerobot_mains_own_refusal_reaches_the_user_in_one_line(dataset, lerobot_main, tmp_path):
    # accelerate (under LeRobot main) shards only on GPUs: the refusal is LeRobot's, said once, exit 1.
    result = run_cli(
        "train",
        "--cluster.num_workers=2",
        *dataset_flags(dataset),
        *TINY_ACT,
        *COMMON,
        "--steps=2",
        "--parallelism.dp_shard=2",
        f"--output_dir={tmp_path}/out",
        env=lerobot_main,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if line.startswith("raycluster train:")]
    assert len(said) == 1 and "ParallelismConfig is only compatible" in said[0], result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)")
def test_a_job_that_ships_lerobot_mains_wheel_trains_on_it_on_simulated_hosts(
    dataset, lerobot_main_wheel, sims, tmp_path
):
    """SageMaker's own driver on two hosts: the wheel travels with the code (`launch --wheel`, staged the same
    way by the sim), every host installs it in its own scratch, and the run is LeRobot main's."""
    hps = {**TINY_ACT_HPS, "steps": 3, "save_freq": 3, "log_freq": 1, "accelerator__mixed_precision": "bf16"}
    (tmp_path / "hps.json").write_text(json.dumps(hps))
    # Its own job: its hosts install LeRobot main's wheel, another LeRobot than every other job's.
    sim = sims(
        tmp_path / "sim",
        "--hosts=2",
        f"--hyperparameters={tmp_path / 'hps.json'}",
        f"--channel=dataset={dataset.root}",
        f"--wheel={lerobot_main_wheel}",
    )
    result = sim.finish()
    assert result == {"algo-1": {"exit_code": 0, "failure": None}, "algo-2": {"exit_code": 0, "failure": None}}
    for host in ("algo-1", "algo-2"):
        assert (
            f"installed {lerobot_main_wheel.name} over the image's packages"
            in (tmp_path / "sim" / host / "log.txt").read_text()
        )
    model = tmp_path / "sim" / "algo-1" / "opt" / "ml" / "model"
    summary = json.loads((model / "raycluster_summary.json").read_text())
    # --accelerator.* is LeRobot main's own flag (0.6.1 would refuse it): it went to LeRobot verbatim.
    assert summary["final_step"] == 3 and summary["world_size"] == 2 and summary["mixed_precision"] == "bf16"
    assert summary["checkpoints"] == [3]  # every host's part of it in (algo-2's empty: DDP), then its record
    assert (model / "pretrained_model" / "model.safetensors").is_file()
    assert version("lerobot") == "0.6.1"  # the borrowed environment is as it was
    assert_clean()
