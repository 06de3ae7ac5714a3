"""The guides' own commands, taken from their pages under docs/ (and the README's copies of two of them) and run
as written: relative paths, no activated virtualenv, in a directory of their own."""

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from guides import guide_block, guide_command, run_guide_block
from simulated import actors_started


def test_the_readmes_train_and_launch_blocks_are_the_guides_own():
    """The front page's smallest training and launch are copies: the guides' blocks, which the tests below run."""
    assert guide_block("README.md", "## Train on this machine") == guide_block("docs/training.md", "## Train")
    assert guide_block("README.md", "## Launch on SageMaker") == guide_block("docs/launch.md", "## Run on SageMaker")


@pytest.mark.slow
def test_the_evaluation_section_runs_as_written_and_exports_the_best(tmp_path):
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    result = run_guide_block("docs/evaluation.md", "## Evaluate every checkpoint while training goes on", tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    summary = json.loads((tmp_path / "outputs" / "pusht" / "raycluster_summary.json").read_text())
    assert [(e["step"], e["status"]) for e in summary["evaluations"]] == [(20, "VALIDATED"), (40, "VALIDATED")]
    for evaluation in summary["evaluations"]:
        assert {"eval_loss", "pc_success", "avg_sum_reward", "avg_max_reward"} <= set(evaluation["metrics"])
        assert f"evaluation of checkpoint {evaluation['step']:06d}: eval_loss" in output
    best = summary["best"]
    losses = {e["step"]: e["metrics"]["eval_loss"] for e in summary["evaluations"]}
    assert best["step"] == min(losses, key=losses.get) and best["metric"] == "eval_loss"
    exported = tmp_path / "outputs" / "pusht-model" / "pretrained_model" / "model.safetensors"
    saved = tmp_path / "outputs" / "pusht-checkpoints" / "checkpoints" / best["checkpoint"] / "pretrained_model"
    assert exported.read_bytes() == (saved / "model.safetensors").read_bytes()
    assert "eval_loss=" not in output  # LeRobot's own inline evaluation never ran


@pytest.mark.slow
def test_the_interactive_section_runs_as_written():
    """`up`, the user's own job submitted with the token, `down`, the probe: from this checkout, as a user would."""
    try:
        result = run_guide_block(
            "docs/interactive-clusters.md", "## Interactive clusters, your own jobs, the dashboard", REPO
        )
    finally:  # the block's own `down` does not run when a line before it fails
        subprocess.run([".venv/bin/raycluster", "down"], cwd=REPO, capture_output=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "task ran on" in output and "succeeded" in output.lower()
    pid = re.search(r"Ray head up \(pid (\d+)\)", output).group(1)
    assert f"Ray head (pid {pid}) stopped" in output and not Path(f"/proc/{pid}").exists()
    assert "all-reduce" in output


@pytest.mark.slow
def test_the_lerobot_main_block_runs_as_written(lerobot_main_wheel, tmp_path):
    """From a clone beside the project's shared/ (the wheel's ../shared/wheels), with the Train section's dataset."""
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(REPO / ".venv")
    (tmp_path / "shared").symlink_to(lerobot_main_wheel.parent.parent)
    made = subprocess.run(
        [".venv/bin/raycluster", "dataset", "synthetic", "--root", "data/synthetic"], cwd=clone, capture_output=True
    )
    assert made.returncode == 0, made.stderr[-2000:]
    result = run_guide_block("docs/lerobot-versions.md", "## LeRobot 0.6.x and LeRobot main", clone)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads((clone / "outputs" / "act-main" / "raycluster_summary.json").read_text())
    assert summary["final_step"] == 20 and summary["checkpoints"] == [10, 20] and summary["world_size"] == 2
    assert summary["policy_wrapper"] == "DistributedDataParallel"


@pytest.mark.parametrize(
    "aws, said",
    [
        ({}, "launch failed: no AWS credentials; run `aws configure`"),
        (
            {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
            "launch failed: cannot reach AWS",
        ),
    ],
)
def test_the_readme_launch_without_credentials_or_network_ends_in_one_line(tmp_path, aws, said):
    """The guide's `launch` (the README's copy) as a new user first runs it: no AWS credentials, or no route to AWS."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true", **aws}
    command = guide_command("docs/launch.md", "## Run on SageMaker", ".venv/bin/raycluster launch")
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1].startswith(f"raycluster launch: error: {said}"), result.stderr[-2000:]


def test_the_model_trainer_snippet_runs_as_written_up_to_the_aws_call(tmp_path):
    """`launch --stage-only` as written, then the snippet itself: ModelTrainer validates the staged source dir
    and takes the hyperparameters; only `train()`, which needs AWS, is left out."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    page, section = "docs/sagemaker-entry-point.md", "Your own `ModelTrainer`"
    staged = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", guide_block(page, section)],
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert staged.returncode == 0, staged.stderr[-3000:]
    source = tmp_path / "staged_source"
    assert {"entry", "raycluster", "jobs", "requirements.txt", "constraints.txt"} <= {p.name for p in source.iterdir()}
    assert (source / ".raycluster" / "auth_token").read_text().strip()
    assert "-c constraints.txt" in (source / "requirements.txt").read_text()
    snippet = guide_block(page, section, "python").replace(
        "trainer.train()", "print(json.dumps(trainer.hyperparameters))"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAGEMAKER_VALIDATE_ROLE": "false",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    made = subprocess.run(
        [".venv/bin/python", "-c", snippet], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=300
    )
    assert made.returncode == 0, made.stderr[-3000:]
    given = json.loads(made.stdout.strip().splitlines()[-1])
    assert given == {"policy__type": "act", "dataset__repo_id": "me/my_dataset", "steps": "100000"}, given


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)")
def test_the_sim_request_form_runs_as_written(tmp_path, dataset, sims):
    """`launch … --dry-run > request.json`, then the sim of that request, both as docs/simulated-jobs.md writes them."""
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "synthetic").symlink_to(dataset.root)
    block = guide_block("docs/simulated-jobs.md", "Or the very request `launch` would send.")
    launch, sim_line = block.split("\n.venv/bin/raycluster sim ")
    dry = subprocess.run(["bash", "-euo", "pipefail", "-c", launch], cwd=tmp_path, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert json.loads((tmp_path / "request.json").read_text())["HyperParameters"]["steps"] == "20"
    args = shlex.split(sim_line)
    workdir = tmp_path / args[args.index("--workdir") + 1]
    # Its own job: the guide's two commands as written.
    result = sims(workdir, *args, cwd=tmp_path).finish()  # as written: its own --workdir, relative to the clone
    assert all(h["exit_code"] == 0 for h in result.values()), result
    summary = json.loads((workdir / "algo-1" / "opt" / "ml" / "model" / "raycluster_summary.json").read_text())
    assert summary["final_step"] == 20 and summary["world_size"] == 2
    # Ray Train's preemption watcher (an actor polling for Ray's node drains, which SageMaker never makes) is off.
    actors = actors_started(workdir, "algo-1") + actors_started(workdir, "algo-2")
    assert "TrainController" in actors and "PreemptionWatcher" not in actors, actors
    print("actors started:", actors)
    # The figures of this sim in docs/simulated-jobs.md come from these lines.
    print(
        "\n".join(
            re.findall(r".*(?:cluster formed|first training step).*", (workdir / "algo-1" / "log.txt").read_text())
        )
    )


@pytest.mark.slow
def test_the_train_sections_ray_job_submit_form_runs_as_written(tmp_path, dataset):
    """On `up`'s cluster, from a checkout whose data/ Ray does not upload (git-ignored)."""
    clone = tmp_path / "clone"
    for part in ("entry", "raycluster", "jobs"):
        shutil.copytree(REPO / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / ".gitignore", clone / ".gitignore")
    (clone / ".venv").symlink_to(REPO / ".venv")
    (clone / "data").mkdir()
    (clone / "data" / "synthetic").symlink_to(dataset.root)
    block = guide_block("docs/training.md", "The same training as a Ray job script, on a running cluster")
    try:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block], cwd=clone, capture_output=True, text=True, timeout=900
        )
    finally:  # `down` is the block's last line: a failure before it still stops the head
        subprocess.run([".venv/bin/raycluster", "down"], cwd=clone, capture_output=True, timeout=120)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = json.loads((clone / "outputs" / "act-job" / "raycluster_summary.json").read_text())
    assert summary["final_step"] == 20 and summary["checkpoints"] == [10, 20] and summary["world_size"] == 2
    assert summary["loss_last"] < summary["loss_first"]
