"""A person's view: the dashboard in a real headless browser (Debian's chromium driven by Playwright),
signed in with the cluster's token, shows the training job in the Jobs list; the dashboard's Train API shows
its attempts, the failed one naming the worker that died."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import REPO, TINY_ACT, dataset_flags, run_cli
from raycluster.checkpoints.manifest import MANIFEST

# `make test` installs Debian's chromium (Playwright's own browser download cannot work offline).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.slow


def test_dashboard_shows_the_training_job_after_signing_in_with_the_token(dataset, tmp_path):
    from playwright.sync_api import sync_playwright

    state = tmp_path / "state"
    assert run_cli("up", "--num-cpus=2", f"--state-dir={state}", timeout=120).returncode == 0
    try:
        token = (state / "auth_token").read_text()
        checkpoints = tmp_path / "ckpt"
        flags = [
            "--cluster.num_workers=2",
            "--cluster.max_failures=1",
            f"--cluster.checkpoint_dir={checkpoints}",
            *dataset_flags(dataset),
            *TINY_ACT,
            "--steps=40",  # long enough that the kill lands mid-run
            "--save_freq=5",
            "--batch_size=2",
            "--num_workers=0",
            f"--output_dir={tmp_path}/out",
        ]
        entrypoint = f"{sys.executable} {REPO}/jobs/train_lerobot.py {' '.join(flags)}"
        # The submitting client is its own process: Ray reads the auth mode once per process.
        submit = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from ray.job_submission import JobSubmissionClient as C; "
                "print(C('http://127.0.0.1:8265').submit_job(entrypoint=sys.argv[1], submission_id='act-in-the-browser'))",
                entrypoint,
            ],
            env={**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(state / "auth_token")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert submit.returncode == 0, submit.stderr[-2000:]
        job = submit.stdout.split()[-1]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
            )
            page = browser.new_page()
            page.goto("http://127.0.0.1:8265/#/jobs", timeout=60_000)
            page.get_by_placeholder("Enter your authentication token").fill(token)
            page.get_by_role("button", name="Submit").click()
            page.get_by_text(job).first.wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / "jobs.png"))
            browser.close()
        assert job == "act-in-the-browser"
        # A worker dies after the first checkpoint: the Train API (on by default for every run) has both attempts.
        wait_for(lambda: (checkpoints / "checkpoints" / "000005" / MANIFEST).exists(), 300)
        wait_for(lambda: 1 in rank_pids(job, token), 60)
        killed = rank_pids(job, token)[1]
        # Still this cluster's worker (not a pid reused since it logged itself): it carries this cluster's token.
        assert f"RAY_AUTH_TOKEN_PATH={state / 'auth_token'}".encode() in process_environ(killed)
        os.kill(killed, signal.SIGKILL)
        wait_for(lambda: len(train_attempts(token)) == 2 and train_attempts(token)[1]["status"] == "RUNNING", 300)
        first, second = train_attempts(token)
        assert first["status"] == "ERRORED" and f"pid: {killed}" in first["status_detail"], first["status_detail"]
        assert [w["status"] for w in first["workers"]] == ["DEAD", "DEAD"] and len(second["workers"]) == 2
        assert all(w["node_ip"] and w["log_file_path"] for w in first["workers"])  # on which host; its log
    finally:
        run_cli("down", f"--state-dir={state}")


def rank_pids(job: str, token: str) -> dict[int, int]:
    """The pid each rank of this job logged of itself, read from the job's own logs: never a worker of
    another run on this machine (a search by process name would find those too)."""
    asked = urllib.request.Request(
        f"http://127.0.0.1:8265/api/jobs/{job}/logs", headers={"Authorization": f"Bearer {token}"}
    )
    logs = json.loads(urllib.request.urlopen(asked, timeout=30).read())["logs"]
    return {int(rank): int(pid) for rank, pid in re.findall(r"raycluster worker rank (\d+) of 2, pid (\d+)", logs)}


def process_environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return environ.read().split(b"\0")
    except OSError:  # gone, or another user's: not ours to kill
        return []


def train_attempts(token: str) -> list[dict]:
    """What the dashboard's Train API says of this cluster's one run (Ray 2.60's UI has no Train page yet)."""
    asked = urllib.request.Request(
        "http://127.0.0.1:8265/api/train/v2/runs/v1", headers={"Authorization": f"Bearer {token}"}
    )
    runs = json.loads(urllib.request.urlopen(asked, timeout=30).read())["train_runs"]
    return runs[0]["attempts"] if runs else []


def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(1)
