"""The Ray task that evaluates one published checkpoint, on whatever node ``--cluster.eval_resources`` picks."""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import ray

from raycluster.checkpoints.scratch import owned_suffix, remove_orphans
from raycluster.checkpoints.transfer import fetch_directory
from raycluster.evals.plan import EvalPlan
from raycluster.faults import Faults
from raycluster.lerobot.api import PRETRAINED_MODEL
from raycluster.lerobot.held_out import held_out_loss
from raycluster.lerobot.policy_loading import train_config
from raycluster.lerobot.rollouts import rollout_metrics

log = logging.getLogger(__name__)


def evaluate_pretrained(pretrained: Path, plan: EvalPlan) -> dict[str, float]:
    """Every kind the plan asks for, from the checkpoint's own saved config."""
    import torch

    torch.set_num_threads(max(1, int(plan.options.get("num_cpus", 1))))  # the task's CPUs, not the node's
    cfg = train_config(pretrained, plan.device)
    metrics: dict[str, float] = {}
    if plan.held_out:
        metrics |= held_out_loss(cfg, plan.device)
    if plan.rollouts:
        metrics |= rollout_metrics(cfg, plan.device)
    return metrics


BEGIN_ASK_S = 60.0
"""How long a task waits for the evaluation keeper's word to begin; past it the task fails (an outcome all the
same, so its checkpoint's hold goes)."""


def begin(evals, name: str, node: str) -> bool:
    """Ask the evaluation keeper whether to run, now that this task has its capacity: no if it was skipped or
    cancelled while it waited. The evaluation's timeout counts from here, not from the wait for capacity."""
    return ray.get(evals.started.remote(name, node), timeout=BEGIN_ASK_S)


@ray.remote(max_retries=0)
def evaluate_checkpoint(checkpoint_keeper, evals, name: str, plan: EvalPlan, faults: Faults) -> dict | None:
    """Fetch ``name``'s ``pretrained_model`` from the hosts that hold it (the keeper holds the checkpoint
    against retention until this ends) and evaluate it; raises on anything that went wrong. None: told not to
    run."""
    node = ray.util.get_node_ip_address()
    if not begin(evals, name, node):
        return None
    started = time.monotonic()
    # An evaluation cancelled mid-run (a timeout, the job's end) left its copy of the policy: the next one here
    # removes it.
    remove_orphans(Path(tempfile.gettempdir()), "raycluster-eval-*")
    faults.raise_in_evaluation(name)
    with tempfile.TemporaryDirectory(prefix=f"raycluster-eval-{name}-", suffix=owned_suffix()) as scratch:
        target = Path(scratch) / name
        fetch_directory(checkpoint_keeper, name, target, only=PRETRAINED_MODEL)
        metrics = evaluate_pretrained(target / PRETRAINED_MODEL, plan)
    return {"metrics": metrics, "seconds": time.monotonic() - started, "node": node}
