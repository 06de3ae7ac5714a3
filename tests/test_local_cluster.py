"""`raycluster up`/`down`: a local head with token auth; refused without the token, fine with it."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, run_cli


def http_status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def client(env_extra: dict, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run(
        list(args), cwd=REPO, env={**env, **env_extra}, capture_output=True, text=True, timeout=timeout
    )


pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def local_head(tmp_path_factory):
    """One `up` for the module: its last test takes it down itself (this fixture's `down` is for a failure
    before that, and then finds nothing recorded)."""
    state = tmp_path_factory.mktemp("up") / "state"
    result = run_cli("up", "--num-cpus=1", f"--state-dir={state}", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ray job submit" in result.stdout and str(state / "auth_token") in result.stdout
    token = (state / "auth_token").read_text()
    assert token not in result.stdout + result.stderr  # the token is named, never printed
    pid = int(result.stdout.split("(pid ", 1)[1].split(")")[0])
    yield state, token, pid
    run_cli("down", f"--state-dir={state}")


def test_token_auth_refuses_strangers_and_admits_the_token(local_head):
    state, token, pid = local_head
    assert http_status("http://127.0.0.1:8265/api/jobs/") == 401
    assert http_status("http://127.0.0.1:8265/api/jobs/", token) == 200
    submit = [
        str(Path(sys.executable).parent / "ray"),
        "job",
        "submit",
        "--address",
        "http://127.0.0.1:8265",
        "--",
        "python",
        "jobs/cluster_info.py",
    ]
    authed = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(state / "auth_token")}
    refused = client({}, *submit)
    assert refused.returncode != 0 and "authentication" in (refused.stdout + refused.stderr).lower()
    accepted = client(authed, *submit)
    assert accepted.returncode == 0, accepted.stdout[-2000:] + accepted.stderr[-2000:]
    assert "1 node(s)" in accepted.stdout and "task ran on" in accepted.stdout
    driver = [sys.executable, "-c", "import ray; ray.init(address='127.0.0.1:6379'); print(len(ray.nodes()))"]
    assert client({}, *driver, timeout=60).returncode != 0
    assert client(authed, *driver, timeout=60).stdout.strip().endswith("1")


def ray_processes_under(temp_dir: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split()


def test_down_leaves_no_process_behind(local_head):
    state = local_head[0]
    temp_dir = json.loads((state / "cluster.json").read_text())["temp_dir"]
    assert ray_processes_under(temp_dir)
    assert run_cli("down", f"--state-dir={state}").returncode == 0
    assert ray_processes_under(temp_dir) == []
    assert not os.path.exists(temp_dir)  # sockets, logs and every process's temp files (pymp-*) went with it
    assert run_cli("down", f"--state-dir={state}").returncode == 2  # nothing recorded any more
