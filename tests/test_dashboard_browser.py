"""A person's view: the dashboard in a real headless browser (Debian's chromium driven by Playwright),
signed in with the cluster's token, shows the training job in the Jobs list."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, TINY_ACT, dataset_flags, run_cli

# `make test` installs Debian's chromium (Playwright's own browser download cannot work offline).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.slow


def test_dashboard_shows_the_training_job_after_signing_in_with_the_token(dataset, tmp_path):
    from playwright.sync_api import sync_playwright

    state = tmp_path / "state"
    assert run_cli("up", "--num-cpus=2", f"--state-dir={state}", timeout=120).returncode == 0
    try:
        token = (state / "auth_token").read_text()
        flags = [
            "--cluster.num_workers=1",
            *dataset_flags(dataset),
            *TINY_ACT,
            "--steps=2",
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
    finally:
        run_cli("down", f"--state-dir={state}")
