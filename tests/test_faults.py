"""SageMaker stopping a job at its worst moments, on simulated hosts through SageMaker's own driver: every host
exits within SageMaker's 120 s, says why, and leaves nothing partial under /opt/ml/checkpoints."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import TINY_ACT_HPS
from raycluster.checkpoints.manifest import MANIFEST
from raycluster.checkpoints.store import LocalStore
from raycluster.faults import PUBLISH_DELAY as TESTING_PUBLISH_DELAY
from raycluster.sagemaker.failure import SIGTERM_REASON
from raycluster.sim.job import KILL_AFTER_S
from simulated import Sim, assert_all_complete, assert_clean, entry_pid, logged_steps, synced_checkpoints, wait_for_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)"),
]

TRAINING = {**TINY_ACT_HPS, "steps": 2000, "save_freq": 1000, "log_freq": 1}


def host_processes(workdir: Path, host: str) -> dict[int, str]:
    """Every process inside a simulated host (its PID namespace), by PID as this machine sees it: command line."""
    wrapper = int((workdir / host / "host.pid").read_text())
    inside = os.readlink(f"/proc/{entry_pid(wrapper)}/ns/pid")
    processes = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.readlink(proc / "ns" / "pid") == inside:
                processes[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
    return processes


def stop_and_time(sim: Sim) -> tuple[dict, float]:
    sim.send_signal(signal.SIGTERM)  # the sim forwards SIGTERM to every host's entry point, as SageMaker does
    signalled = time.monotonic()
    result = sim.finish(timeout=KILL_AFTER_S + 60)
    return result, time.monotonic() - signalled


def assert_nothing_partial(workdir: Path) -> None:
    """Under the checkpoint root only whole checkpoints: no staging, no half-renamed copy, no bad manifest."""
    root = synced_checkpoints(workdir)
    if root.exists():
        assert all(p.name.isdigit() and p.is_dir() for p in root.iterdir()), sorted(os.listdir(root))
        assert_all_complete(root)


def report(fault: str, seconds: float, result: dict) -> None:
    # The fault table of docs/interruptions.md is made from these lines (`pytest tests/test_faults.py -s`).
    hosts = "; ".join(f"{host}: {r['exit_code']} {r['failure']!r}" for host, r in result.items())
    print(f"\nFAULT | {fault} | {seconds:.1f} s | {hosts}")


@pytest.mark.parametrize(
    "fault, moment",
    [("while the cluster forms", "host algo-1 of"), ("while the job starts", "submitted job")],
)
def test_sigterm_before_training_ends_every_host_with_nothing_saved(job, tmp_path, fault, moment):
    # Each fault its own job: a job is stopped once, at the moment the test names.
    sim = job(tmp_path, 2, TRAINING)
    wait_for_log(tmp_path / "algo-1" / "log.txt", moment)
    result, seconds = stop_and_time(sim)
    report(fault, seconds, result)
    assert seconds < KILL_AFTER_S and all(h["exit_code"] == 143 for h in result.values()), (seconds, result)
    # `stopped by SIGTERM …`, and never a trained run's line (`… at step N; checkpoint N …`)
    assert all(h["failure"].startswith("stopped by SIGTERM") for h in result.values()), result
    assert all("at step" not in h["failure"] for h in result.values()), result
    log = tmp_path / "algo-1" / "log.txt"
    if moment == "host algo-1 of":  # the guide: nothing submitted
        assert "submitted job" not in log.read_text()
    assert logged_steps(log) == []  # the guide: stopped before training, so not one step trained
    assert not synced_checkpoints(tmp_path).exists() or not any(synced_checkpoints(tmp_path).iterdir())
    assert_clean()


def test_sigterm_while_a_checkpoint_is_published_and_the_dashboard_is_stopped_completes_it_then_saves_the_step(
    job, tmp_path, monkeypatch
):
    # Two faults at one stop, each the other's worst moment: a publish is held 8 s, and the head's dashboard
    # (its Jobs API, the only way the head asks the job to stop) no longer answers.
    monkeypatch.setenv(TESTING_PUBLISH_DELAY, "8")  # the sim passes it to every host: each publish takes 8 s
    # Its own job: every publish of every host is held (a fault), the dashboard is stopped, then the job.
    sim = job(tmp_path, 2, {**TRAINING, "save_freq": 2})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "holding the publish of 000002")
    dashboards = [pid for pid, args in host_processes(tmp_path, "algo-1").items() if "dashboard/dashboard.py" in args]
    assert dashboards
    for pid in dashboards:
        os.kill(pid, signal.SIGSTOP)
    result, seconds = stop_and_time(sim)
    report("dashboard stopped (SIGSTOP) during a checkpoint's publish, then SIGTERM", seconds, result)
    # The head's log streams through the dashboard, so it stops there; the driver's own log file has every step.
    [driver_log] = (tmp_path / "algo-1" / "scratch" / "ray").glob("session_*/logs/job-driver-*.log")
    step = max(logged_steps(driver_log))
    # The guide: that publish completes, then the step reached is saved; 143 `… at step N; checkpoint N saved`,
    # the head having sent SIGTERM to the job's driver itself.
    said = f"stopped by SIGTERM at step {step}; checkpoint {step} saved"
    assert seconds < KILL_AFTER_S and all(h == {"exit_code": 143, "failure": said} for h in result.values()), result
    published = set(os.listdir(synced_checkpoints(tmp_path)))
    assert {"000002", f"{step:06d}"} <= published, (step, sorted(published))
    assert "SIGTERM to the job's driver" in (tmp_path / "algo-1" / "log.txt").read_text()
    assert_nothing_partial(tmp_path)
    assert_clean()


def test_sigterm_while_the_final_model_is_published_lands_it_whole(job, tmp_path, monkeypatch):
    monkeypatch.setenv(TESTING_PUBLISH_DELAY, "8")
    # Its own job: every publish is held, and the job is stopped during the final model's (read back from the last
    # checkpoint by the driver once training returned).
    sim = job(tmp_path, 2, {**TRAINING, "steps": 3})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "holding the publish of the model")
    result, seconds = stop_and_time(sim)
    report("during the final model's publish", seconds, result)
    # The guide: the model lands whole in /opt/ml/model; 143 `stopped by SIGTERM …` (training had ended: the
    # run has no step of its own to name, so the head's reason stands).
    expected = {"exit_code": 143, "failure": SIGTERM_REASON}
    assert seconds < KILL_AFTER_S and all(h == expected for h in result.values()), (seconds, result)
    model = tmp_path / "algo-1" / "opt" / "ml" / "model"
    assert sorted(p.name for p in model.iterdir() if p.name.startswith(".")) == []
    assert (model / "pretrained_model" / "model.safetensors").is_file()
    assert LocalStore(model).problems("pretrained_model") is None  # every file of its record, checksums included
    # ... and it is the final checkpoint's policy (step 3, published before the model), byte for byte.
    checkpoints = synced_checkpoints(tmp_path)
    assert os.listdir(checkpoints) == ["000003"]
    final = json.loads((checkpoints / "000003" / MANIFEST).read_text())
    landed = json.loads((model / "pretrained_model" / MANIFEST).read_text())
    prefix = "pretrained_model/"
    # The checkpoint's record also names each file's part and attempt; the contents are what must match.
    contents = {path: (e["size"], e["xxh3_128"]) for path, e in landed.items()}
    assert contents == {
        path.removeprefix(prefix): (e["size"], e["xxh3_128"]) for path, e in final.items() if path.startswith(prefix)
    }
    assert_nothing_partial(tmp_path)
    assert_clean()
