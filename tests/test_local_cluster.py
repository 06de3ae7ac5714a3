"""`raycluster up`/`down`: a local head with token auth; refused without the token, fine with it."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, TINY_ACT, dataset_flags, run_cli


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


RAY_SINGLETONS = {"TrainStateActor", "_AutoscalingCoordinatorActor"}
"""Ray's own detached actors, made once per cluster by the first Ray Train run and kept for its dashboard."""


def alive_actors(authed: dict) -> list[str]:
    """The classes of the actors alive on the running cluster, as a client connected with the token sees them
    (Ray's own singletons left out)."""
    code = (
        "import ray; from ray.util.state import list_actors; ray.init(address='127.0.0.1:6379', logging_level='ERROR');"
        "print([a.class_name for a in list_actors(filters=[('state', '=', 'ALIVE')])])"
    )
    listed = client(authed, sys.executable, "-c", code, timeout=60)
    assert listed.returncode == 0, listed.stderr[-2000:]
    return [name for name in eval(listed.stdout.strip().splitlines()[-1]) if name not in RAY_SINGLETONS]


def test_a_flag_lerobot_refuses_on_a_running_cluster_ends_in_one_line_and_leaves_nothing(local_head, dataset, tmp_path):
    # The driver does not import LeRobot, so LeRobot refuses `--steps=ten` on the rank, before any step: the
    # reason comes back as the usage error it was before, and nothing of the run stays on the cluster.
    state = local_head[0]
    authed = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(state / "auth_token")}
    out = tmp_path / "out"
    result = client(
        authed,
        *(sys.executable, "-m", "raycluster", "train", "--cluster.address=127.0.0.1:6379"),
        *("--cluster.num_workers=1", "--cluster.cpus_per_worker=1", *dataset_flags(dataset), *TINY_ACT),
        *(f"--output_dir={out}", "--steps=ten"),
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("raycluster train: error:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert (
        len(errors) == 1 and "LeRobot rejected the training flags" in errors[0] and "Couldn't parse 'ten'" in errors[0]
    ), errors
    assert not out.exists()  # nothing written where the run would have trained
    deadline = time.monotonic() + 60
    while (actors := alive_actors(authed)) and time.monotonic() < deadline:
        time.sleep(2)
    assert actors == [], actors


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
