"""Whole SageMaker-shaped jobs on simulated hosts (network + PID namespaces): real Ray, real LeRobot."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)"),
]

TINY_ACT_HPS = {
    "policy.type": "act", "policy.push_to_hub": False, "policy.pretrained_backbone_weights": None,
    "policy.dim_model": 64, "policy.n_heads": 2, "policy.dim_feedforward": 128, "policy.n_encoder_layers": 1,
    "policy.n_decoder_layers": 1, "policy.chunk_size": 10, "policy.n_action_steps": 10,
    "dataset.repo_id": "raycluster/synthetic", "batch_size": 4, "num_workers": 0, "seed": 1,
}


def start_sim(workdir: Path, hosts: int, hps: dict, dataset) -> subprocess.Popen:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "hps.json").write_text(json.dumps(hps))
    return subprocess.Popen(
        [sys.executable, "-m", "raycluster", "sim", f"--hosts={hosts}", f"--workdir={workdir}",
         f"--hyperparameters={workdir / 'hps.json'}", f"--channel=dataset={dataset.root}"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish(sim: subprocess.Popen, workdir: Path, timeout: float = 600) -> dict:
    output, _ = sim.communicate(timeout=timeout)
    (workdir / "sim_output.txt").write_text(output)
    assert (workdir / "sim_result.json").exists(), output[-3000:]
    return json.loads((workdir / "sim_result.json").read_text())["hosts"]


def wait_for_log(path: Path, text: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} never appeared in {path}")


def assert_clean() -> None:
    assert "rc" not in "".join(line.split()[0][:2] for line in
                               subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines())


@pytest.mark.parametrize("hosts", [2, 3])
def test_simulated_job_trains_and_puts_the_model_on_the_head(dataset, tmp_path, hosts):
    sim = start_sim(tmp_path, hosts, {**TINY_ACT_HPS, "steps": 4, "save_freq": 2, "log_freq": 2}, dataset)
    result = finish(sim, tmp_path)
    assert sim.returncode == 0
    assert result == {f"algo-{k}": {"exit_code": 0, "failure": None} for k in range(1, hosts + 1)}
    model = tmp_path / "algo-1" / "opt" / "ml" / "model"
    assert (model / "pretrained_model" / "model.safetensors").is_file()
    summary = json.loads((model / "raycluster_summary.json").read_text())
    assert summary["world_size"] == hosts and summary["final_step"] == 4 and summary["backend"] == "gloo"
    log = (tmp_path / "algo-1" / "log.txt").read_text()
    assert "cluster formed" in log
    assert_clean()


def test_failing_training_ends_every_host_with_the_drivers_code(dataset, tmp_path):
    sim = start_sim(tmp_path, 2, {**TINY_ACT_HPS, "steps": 4, "policy.type": "no_such_policy"}, dataset)
    result = finish(sim, tmp_path)
    assert result["algo-1"]["exit_code"] == 2  # raycluster train's own code for a rejected flag
    assert "LeRobot rejected the training flags" in result["algo-1"]["failure"]
    assert result["algo-2"] == {"exit_code": 0, "failure": None}


def test_a_lost_worker_host_fails_the_job_naming_it(dataset, tmp_path):
    sim = start_sim(tmp_path, 2, {**TINY_ACT_HPS, "steps": 2000, "save_freq": 1000, "log_freq": 1}, dataset)
    wait_for_log(tmp_path / "algo-1" / "log.txt", "step:1 ")
    os.kill(int((tmp_path / "algo-2" / "host.pid").read_text()), signal.SIGKILL)
    killed = time.monotonic()
    result = finish(sim, tmp_path, timeout=180)
    assert result["algo-1"]["exit_code"] != 0
    assert "algo-2" in result["algo-1"]["failure"] and "left the Ray cluster" in result["algo-1"]["failure"]
    assert time.monotonic() - killed < 90
    assert_clean()


def test_sigterm_on_every_host_ends_well_inside_120s(dataset, tmp_path):
    sim = start_sim(tmp_path, 2, {**TINY_ACT_HPS, "steps": 2000, "save_freq": 1000, "log_freq": 1}, dataset)
    wait_for_log(tmp_path / "algo-1" / "log.txt", "step:1 ")
    sim.send_signal(signal.SIGTERM)  # the sim forwards SIGTERM to every host's entry point, as SageMaker does
    stopped = time.monotonic()
    result = finish(sim, tmp_path, timeout=180)
    assert time.monotonic() - stopped < 90
    assert all(h["exit_code"] == 143 and "SIGTERM" in h["failure"] for h in result.values()), result
    assert not (tmp_path / "algo-1" / "opt" / "ml" / "model" / "pretrained_model").exists()
    assert_clean()
