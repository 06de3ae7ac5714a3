"""``--cluster.async_eval`` end to end: 2 CPU workers train while every published checkpoint is evaluated as a Ray
task (LeRobot's held-out loss, rollouts in gym-pusht through LeRobot's eval_policy_all), the best exported."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from conftest import COMMON, TINY_ACT, recorded_rows, run_cli
from raycluster.evals.plan import EvalPlan
from raycluster.evals.task import evaluate_pretrained
from raycluster.faults import EVAL_RAISE as TESTING_RAISE
from raycluster.training.summary import read_summary

pytestmark = pytest.mark.slow

PUSHT_STATE = {
    "observation.environment_state": {"dtype": "float32", "shape": (16,), "names": None},
    "observation.state": {"dtype": "float32", "shape": (2,), "names": ["x", "y"]},
    "action": {"dtype": "float32", "shape": (2,), "names": ["x", "y"]},
}


def contradicting_pusht_dataset(root, episodes: int = 4, frames: int = 30):
    """gym-pusht's features (LeRobot's ``--env.obs_type=environment_state_agent_pos``), with the last episode,
    which ``--dataset.eval_split=0.25`` holds out, moving against the others: the better the policy fits the
    training episodes, the worse its held-out loss, so the best checkpoint is an early one, not the last."""
    rng = np.random.default_rng(0)
    dataset = LeRobotDataset.create(repo_id="raycluster/pusht-contra", fps=10, features=PUSHT_STATE, root=root)
    for episode in range(episodes):
        direction = -1.0 if episode == episodes - 1 else 1.0
        start = rng.uniform(150, 350, size=2).astype(np.float32)
        for i in range(frames):
            agent = start + direction * 4.0 * i
            dataset.add_frame(
                {
                    "observation.environment_state": rng.uniform(0, 512, size=16).astype(np.float32),
                    "observation.state": agent,
                    "action": agent + direction * 40.0,
                    "task": "Push the T-shaped block onto the T-shaped target.",
                }
            )
        dataset.save_episode()
    dataset.finalize()
    return root


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory, isolated_env):
    work = tmp_path_factory.mktemp("evals")
    data = contradicting_pusht_dataset(work / "data")
    flags = [
        "--cluster.num_workers=2",
        "--cluster.cpus_per_worker=0.5",  # the local cluster has 2 CPUs: one is left for the evaluations
        f"--cluster.checkpoint_dir={work / 'checkpoints'}",
        f"--cluster.model_dir={work / 'model'}",
        "--cluster.async_eval=true",
        '--cluster.eval_resources={"CPU": 1}',
        "--cluster.keep_best=eval_loss",
        "--cluster.keep_checkpoints=1",
        "--dataset.repo_id=raycluster/pusht-contra",
        f"--dataset.root={data}",
        "--dataset.eval_split=0.25",
        "--env.type=pusht",
        "--env.obs_type=environment_state_agent_pos",
        "--env.episode_length=20",
        "--eval.n_episodes=2",
        "--eval.batch_size=2",
        "--policy.optimizer_lr=0.001",
        "--steps=8",
        "--save_freq=2",
        "--log_freq=2",
        f"--output_dir={work / 'run'}",
    ]
    result = run_cli("train", *TINY_ACT, *COMMON, *flags, env={TESTING_RAISE: "4"})
    return work, result


def test_every_checkpoint_is_evaluated_and_a_raising_one_is_recorded(evaluated_run):
    work, result = evaluated_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = read_summary(work / "run")
    outcomes = {e["step"]: e for e in summary["evaluations"]}
    assert sorted(outcomes) == [2, 4, 6, 8]  # every one published (retention has deleted some since)
    assert outcomes[4]["status"] == "VALIDATION_FAILED" and TESTING_RAISE in outcomes[4]["error"]
    for step in (2, 6, 8):
        metrics = outcomes[step]["metrics"]
        assert outcomes[step]["status"] == "VALIDATED", outcomes[step]
        assert metrics["eval_frames"] == 30 and metrics["eval_loss"] > 0
        assert metrics["n_episodes"] == 2 and 0 <= metrics["pc_success"] <= 100 and metrics["avg_max_reward"] >= 0
    # LeRobot ran no evaluation of its own: every one of them came from raycluster's tasks.
    assert "eval_loss=" not in result.stdout + result.stderr
    for step in (2, 6, 8):
        assert f"evaluation of checkpoint {step:06d}: eval_loss" in result.stdout + result.stderr
    rows = recorded_rows(work / "run")["run"]
    drawn = {row["step"]: row for row in rows if "eval/loss" in row}
    assert sorted(drawn) == [2, 6, 8]
    assert all(drawn[s]["eval/loss"] == pytest.approx(outcomes[s]["metrics"]["eval_loss"]) for s in drawn)
    assert all("eval/avg_sum_reward" in drawn[s] for s in drawn)


def test_the_best_checkpoint_is_the_model_and_survives_retention(evaluated_run):
    work, result = evaluated_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = read_summary(work / "run")
    losses = {e["step"]: e["metrics"]["eval_loss"] for e in summary["evaluations"] if e["status"] == "VALIDATED"}
    best = summary["best"]
    assert best["metric"] == "eval_loss" and best["step"] == min(losses, key=losses.get)
    assert best["step"] != 8, f"the arranged run's held-out loss should rise as it trains: {losses}"
    assert best["exported_to"] == str(work / "model" / "pretrained_model")
    kept = sorted(p.name for p in (work / "checkpoints" / "checkpoints").iterdir() if p.name.isdigit())
    assert kept == [best["checkpoint"], "000008"]  # keep 1: the newest, and the best, which retention spares
    exported = work / "model" / "pretrained_model" / "model.safetensors"
    saved = work / "checkpoints" / "checkpoints" / best["checkpoint"] / "pretrained_model" / "model.safetensors"
    assert exported.read_bytes() == saved.read_bytes()
    assert json.loads((work / "model" / "raycluster_summary.json").read_text())["best"] == best


def test_the_held_out_loss_is_lerobots_own_at_one_rank(one_worker_run):
    """LeRobot's inline ``step N: eval_loss=`` (its loop, at one rank) and raycluster's evaluation of checkpoint N:
    the same weights, the same held-out episodes, the same number."""
    out, _, result = one_worker_run
    inline = {
        int(m[1]): float(m[2]) for m in re.finditer(r"step (\d+): eval_loss=([0-9.]+)", result.stdout + result.stderr)
    }
    assert sorted(inline) == [10, 20]
    plan = EvalPlan(held_out=True, rollouts=False, options={"resources": {}})
    threads = torch.get_num_threads()  # the evaluation sets this process's to the CPUs its task would hold
    try:
        for step, loss in inline.items():
            committed = out.parent / "checkpoints" / "checkpoints" / f"{step:06d}"  # rank 0 keeps only its last
            ours = evaluate_pretrained(committed / "pretrained_model", plan)
            assert f"{ours['eval_loss']:.4f}" == f"{loss:.4f}" and ours["eval_frames"] == 60
    finally:
        torch.set_num_threads(threads)


def test_the_ledger_counts_the_wait_for_the_evaluations_still_running_when_training_returned(evaluated_run):
    work, result = evaluated_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = read_summary(work / "run")
    [start] = summary["ledger"]["starts"]
    phases = summary["phases"]
    # Checkpoint 8 is published as training ends: its evaluation (two rollouts) runs after fit() returned.
    waited = phases["evaluations_done"] - phases["training_returned"]
    assert waited > 0 and start["parts"]["evaluation"] == pytest.approx(waited, abs=0.02), (start, phases)
    assert sum(start["parts"].values()) == pytest.approx(start["wall_s"], rel=0.02), start
