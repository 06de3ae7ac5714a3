"""A job's environment and secrets on simulated hosts through SageMaker's own driver: Secrets Manager is the
moto server on loopback, reached by each host through the sim's gateway with real boto3."""

import hashlib
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from conftest import REPO, TINY_ACT_HPS, logged_losses, run_cli, write_hub_cache
from simulated import assert_clean, files_holding, wait_for_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)"),
]

ROLE = "arn:aws:iam::123456789012:role/raycluster-sim"
PROBE = "--include=tests/jobs/env_probe.py"  # the sim stages the code channel itself: the script goes there too
ENVIRONMENTS = "s3://ckpts/environments"
"""Where these jobs keep their environment (the module's S3 server): the second job restores the first's."""
DASHBOARD_VIEWS = (
    "/api/jobs/",
    "/api/v0/actors?detail=1&limit=10000",
    "/api/v0/tasks?detail=1&limit=10000",
    "/api/v0/workers?detail=1&limit=10000",
    "/api/v0/runtime_envs?detail=1",
    "/nodes?view=summary",
)


def dry_run_request(tmp_path: Path, *flags: str) -> Path:
    shown = run_cli(
        "launch", "--instance-type=ml.c5.xlarge", "--instance-count=2", f"--role={ROLE}", "--region=us-east-1",
        PROBE, "--entry.job=jobs/env_probe.py", f"--env-cache-s3={ENVIRONMENTS}", "--dry-run", *flags,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    (tmp_path / "request.json").write_text(shown.stdout)
    return tmp_path / "request.json"


ASK = """import json, sys, urllib.error, urllib.request as u
token = sys.argv[1]
for path in sys.argv[2:]:
    request = u.Request("http://127.0.0.1:8265" + path, headers={"Authorization": "Bearer " + token})
    try:
        with u.urlopen(request, timeout=30) as answer:
            print(json.dumps({"path": path, "status": answer.status, "body": answer.read().decode()}))
    except urllib.error.HTTPError as exc:
        print(json.dumps({"path": path, "status": exc.code, "body": exc.read().decode()}))
"""


def dashboard_answers(workdir: Path) -> dict[str, dict]:
    """What the head's dashboard shows of jobs (their logs too), actors, tasks, workers and runtime envs, as a
    signed-in user (the job's token) reaching it on algo-1's loopback, where SSM's port forwarding lands."""
    token = (workdir / "algo-1" / "opt" / "ml" / "input" / "data" / "code" / ".raycluster" / "auth_token").read_text()
    netns = (workdir / "algo-1" / "netns").read_text()

    def ask(*paths: str) -> dict[str, dict]:
        answer = subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-c", ASK, token, *paths],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert answer.returncode == 0, answer.stderr[-2000:]
        return {row["path"]: row for row in map(json.loads, answer.stdout.splitlines())}

    shown = ask(*DASHBOARD_VIEWS)
    jobs = json.loads(shown["/api/jobs/"]["body"])
    return shown | ask(*(f"/api/jobs/{job['submission_id']}/logs" for job in jobs))


def test_env_and_a_secret_reach_every_rank_on_every_host_and_the_value_nowhere_else(s3_endpoint, sims, tmp_path):
    value = "hf_" + secrets.token_hex(20)
    boto3.client("secretsmanager").create_secret(Name="sim/hf-token", SecretString=value)
    release = tmp_path / "release"
    request = dry_run_request(
        tmp_path,
        "--env=NCCL_DEBUG=INFO",
        "--env=SOME_FLAG=1",
        "--env=PROBE_NAMES=NCCL_DEBUG,SOME_FLAG,HF_TOKEN",
        f"--env=PROBE_RELEASE={release}",
        "--secret=HF_TOKEN=sim/hf-token",
    )
    assert value not in request.read_text()
    workdir = tmp_path / "sim"
    # Its own job: a probe job script that reports every rank's environment, no training.
    sim = sims(workdir, f"--request={request}", PROBE, f"--aws-endpoint={s3_endpoint['AWS_ENDPOINT_URL']}")
    head_log = workdir / "algo-1" / "log.txt"
    for rank in (0, 1):
        wait_for_log(head_log, f"probe: rank {rank} on ", sim=sim)
    shown = dashboard_answers(workdir)
    # The views answered, about this very job: its entrypoint, its ranks' actors and their lines.
    assert all(view["status"] == 200 for view in shown.values()), [v for v in shown.values() if v["status"] != 200]
    assert "env_probe.py" in shown["/api/jobs/"]["body"] and "RayTrainWorker" in shown[DASHBOARD_VIEWS[1]]["body"]
    assert any("probe: rank" in view["body"] for path, view in shown.items() if path.endswith("/logs"))
    assert [path for path, view in shown.items() if value in view["body"]] == []
    release.touch()
    result = sim.finish()
    assert result == {h: {"exit_code": 0, "failure": None} for h in ("algo-1", "algo-2")}, result
    log = head_log.read_text()
    assert "probe: every rank saw every name" in log
    assert f": stored in {ENVIRONMENTS}/" in log  # algo-1 kept the environment it made, for the next job
    said = f"HF_TOKEN=#{hashlib.sha256(value.encode()).hexdigest()[:12]}"
    lines = [line for line in log.splitlines() if "probe: rank" in line]
    assert {line.split(" on ")[1].split()[0] for line in lines} == {"ip-algo-1", "ip-algo-2"}, lines
    assert all("NCCL_DEBUG=#" in line and "SOME_FLAG=#" in line and said in line for line in lines), lines
    # Nowhere in what the hosts wrote: logs, /opt/ml (model, output, checkpoints), Ray's session files.
    assert files_holding(workdir, value.encode()) == []
    assert_clean()


def test_a_secret_that_does_not_exist_ends_every_host_before_ray_starts_naming_it(s3_endpoint, sims, tmp_path):
    request = dry_run_request(tmp_path, "--secret=WANDB_API_KEY=sim/no-such-secret")
    workdir = tmp_path / "sim"
    bucket, prefix = ENVIRONMENTS.removeprefix("s3://").split("/", 1)
    kept = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("KeyCount", 0)
    # Its own job: it ends before Ray starts.
    result = sims(workdir, f"--request={request}", PROBE, f"--aws-endpoint={s3_endpoint['AWS_ENDPOINT_URL']}").finish()
    said = "secret WANDB_API_KEY does not exist: create it, or fix --secret WANDB_API_KEY=..."
    assert result == {h: {"exit_code": 2, "failure": said} for h in ("algo-1", "algo-2")}, result
    for host in ("algo-1", "algo-2"):
        log = (workdir / host / "log.txt").read_text()
        assert "Ray runtime started" not in log
        # The environment an earlier job of the module kept (the same requirements, the same image) is restored
        # on every host, nothing installed; run alone, this job installs it and algo-1 keeps it.
        if kept:
            assert f"restored from {ENVIRONMENTS} in" in log and "installing what" not in log, log[:3000]
        else:
            assert "installing what requirements.txt adds" in log and (": stored in" in log) == (host == "algo-1")
    assert_clean()


def guide_staging_lines() -> list[str]:
    """The guide's two commands that stage the Hub's files: the block's lines before `launch`."""
    text = (REPO / "docs" / "environment-and-secrets.md").read_text()
    block = text[text.index("\n## Environment, secrets") :].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line.split("#")[0].strip() for line in block.splitlines()]
    staging = [line for line in lines if line and "raycluster launch" not in line and not line.startswith("--")]
    assert len(staging) == 2 and "hf download" in staging[0] and "raycluster hub-cache" in staging[1], staging
    return staging


def test_a_pretrained_policy_from_a_hub_cache_on_s3_fine_tunes_with_no_hub(
    job, one_worker_run, s3_endpoint, tmp_path, monkeypatch
):
    # From scratch first: 20 steps at a rate that learns in 20, whose final model becomes the pretrained policy.
    # Where that policy was trained does not matter here: the session's local run on one worker.
    _, scratch_model, scratch = one_worker_run
    from_scratch = logged_losses(scratch.stdout + scratch.stderr)
    hps = {**TINY_ACT_HPS, "steps": 20, "save_freq": 20, "log_freq": 1, "policy__optimizer_lr": 1e-3}
    # Saved as the repo the guide stages, in the cache `hf download` would have made in a clone of the guide's.
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(REPO / ".venv")
    write_hub_cache(
        clone / "hub",
        "lerobot/smolvla_base",
        scratch_model / "pretrained_model",
    )
    boto3.client("s3").create_bucket(Bucket="my-bucket")
    # The guide's two commands as written (HF_HUB_OFFLINE=1 here: `hf download` finds the repo in the cache).
    for line in guide_staging_lines():
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=clone, capture_output=True, text=True)
        assert ran.returncode == 0, (line, ran.stderr[-2000:])
    assert "model:lerobot/smolvla_base" in ran.stdout, ran.stdout
    # The `hub` channel as SageMaker presents it: the prefix's objects as files (no links, no blobs).
    channel = tmp_path / "channel"
    s3 = boto3.client("s3")
    for item in s3.list_objects_v2(Bucket="my-bucket", Prefix="hub/")["Contents"]:
        target = channel / item["Key"].removeprefix("hub/")
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file("my-bucket", item["Key"], str(target))
    assert not list(channel.rglob("blobs")) and not [p for p in channel.rglob("*") if p.is_symlink()]
    # The hosts have no network at all, and HF_HUB_OFFLINE comes from the job (the channel's), not from here.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    tuned = {key: value for key, value in hps.items() if not key.startswith("policy__")}
    tuned |= {"policy__path": "lerobot/smolvla_base", "policy__push_to_hub": False, "steps": 2, "save_freq": 2}
    # Its own job: the Hub cache's channel is this job's alone.
    result = job(tmp_path / "tuned", 2, tuned, f"--channel=hub={channel}").finish()
    assert all(h["exit_code"] == 0 for h in result.values()), result
    fine_tuned = logged_losses((tmp_path / "tuned" / "algo-1" / "log.txt").read_text())
    assert fine_tuned[1] < from_scratch[1] / 2, (fine_tuned, from_scratch)
    model_dir = tmp_path / "tuned" / "algo-1" / "opt" / "ml" / "model"
    config = json.loads((model_dir / "pretrained_model" / "train_config.json").read_text())
    assert config["policy"]["pretrained_path"] == "lerobot/smolvla_base"
    assert_clean()
