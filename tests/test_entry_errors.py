"""The entry point on malformed input: one clear line, the failure file, a non-zero exit, no Ray process."""

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from raycluster.errors import UsageError
from raycluster.layout import AUTH_TOKEN_ENV, BASE_ENV
from raycluster.sagemaker.entrypoint import read_job
from test_topology import fake_job


def processes_of_run(base) -> set[int]:
    """Every process this run's entry point left: all inherit its environment, and with it this test's own
    fake /opt/ml (a Ray node, its raylet and gcs_server too). Another run's processes never match."""
    mark = f"{BASE_ENV}={base}".encode()
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                found.add(int(proc.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"SM_HOSTS": "not json"}, "SM_HOSTS is not valid JSON"),
        ({"SM_HOSTS": "[]"}, "SM_HOSTS is empty"),
        ({"SM_HOSTS": '["algo-2"]'}, "SM_CURRENT_HOST=algo-1 is not in SM_HOSTS"),
        ({"SM_HOSTS": '["algo-1","algo-2","algo-2"]'}, "SM_HOSTS lists algo-2 more than once"),
        ({"SM_NUM_GPUS": "x"}, "SM_NUM_GPUS='x' is not an integer"),
        ({"resourceconfig": None}, "resourceconfig.json is missing"),
        ({"hps": {"entry__job": "jobs/nope.py"}}, "entry.job=jobs/nope.py: no such Ray job script"),
        ({"hps": {"entry__bogus": "1"}}, "unknown hyperparameter entry__bogus"),
        (
            {"hosts": ("algo-1",), "hps": {"entry__head_trains": "false"}},
            "entry__head_trains=false needs 2 or more hosts",
        ),
        (
            {"hps": {"cluster__checkpoint_dir": "S3://bucket/x"}},
            "--cluster.checkpoint_dir=S3://bucket/x: only local paths and s3://",
        ),
        ({"hps": {"cluster__cpus_per_worker": "nan"}}, "--cluster.cpus_per_worker must be a finite number > 0"),
        # Kept where SageMaker keeps nothing: published into the code channel, lost with the instance.
        ({"hps": {"cluster__checkpoint_dir": "ckpt"}}, "--cluster.checkpoint_dir=ckpt: on SageMaker only"),
        ({"hps": {"cluster__checkpoint_dir": "s3:/bucket/x"}}, "--cluster.checkpoint_dir=s3:/bucket/x: only local"),
        ({"hps": {"cluster__checkpoint_dir": "s3://B/x"}}, "--cluster.checkpoint_dir=s3://B/x: not an s3://bucket"),
        ({"hps": {"cluster__model_dir": "/tmp/model"}}, "--cluster.model_dir=/tmp/model: on SageMaker only"),
        # Empty, it would override the default root with none: a spot job that keeps nothing.
        ({"hps": {"cluster__checkpoint_dir": ""}}, "--cluster.checkpoint_dir= is empty: on SageMaker"),
        # Retention would delete the only complete checkpoint in S3 while the newer one is still uploading.
        ({"hps": {"cluster__keep_checkpoints": "1"}}, "--cluster.keep_checkpoints=1 on SageMaker"),
        ({"hps": {"cluster__keep_checkpoints": "-1"}}, "--cluster.keep_checkpoints must be >= 0"),
        # Fail closed: no token in the code, no cluster (its Jobs API would run anyone's code as the job's role).
        ({}, "no Ray auth token at"),
    ],
)
def test_malformed_job_fails_fast(tmp_path, change, message):
    env = fake_job(tmp_path, hosts=change.pop("hosts", ("algo-1", "algo-2")), hps=change.pop("hps", None))
    base = tmp_path / "opt" / "ml"
    if "resourceconfig" in change:
        (base / "input" / "config" / "resourceconfig.json").unlink()
    else:
        env.update(change)
    assert_refused(env, base, message)


def assert_refused(env: dict, base, message: str) -> None:
    """The entry point on ``env`` stops with ``message``: one error line, the failure file, no process left."""
    result = subprocess.run(
        [sys.executable, "-m", "entry"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert message in (base / "output" / "failure").read_text()
    assert processes_of_run(env[BASE_ENV]) == set()


def test_an_empty_token_file_is_no_token(tmp_path):
    # Else its outcome server would take `Authorization: Bearer ` from anyone.
    token = tmp_path / "auth_token"
    token.write_text("\n")
    env = {**fake_job(tmp_path), AUTH_TOKEN_ENV: str(token)}
    assert_refused(env, tmp_path / "opt" / "ml", f"the Ray auth token at {token} is empty")


def test_an_emptied_checkpoint_dir_is_refused_and_an_emptied_model_dir_is_not(tmp_path):
    # The topology's default comes first and the user's empty value after it: last wins, so it arrives.
    with pytest.raises(UsageError, match=r"--cluster.checkpoint_dir= is empty: .* under .*/checkpoints or an s3://"):
        read_job(fake_job(tmp_path, hps={"cluster__checkpoint_dir": ""}))
    # The final checkpoint still holds the model, and --checkpoint_format=dcp needs no model dir.
    _, _, flags = read_job(fake_job(tmp_path, hps={"cluster__model_dir": ""}))
    assert flags[-1] == "--cluster.model_dir="
    _, _, flags = read_job(fake_job(tmp_path))
    assert f"--cluster.checkpoint_dir={tmp_path}/opt/ml/checkpoints/lerobot" in flags
