"""The actors a run publishes through, all on the driver's node: the model's keeper, the checkpoints' keeper
(with a part store on every node) and the evaluations' keeper; and what the driver does with them at the end."""

from __future__ import annotations

from dataclasses import dataclass

from raycluster.checkpoints.keeper import keeper_and_part_stores, keeper_on_this_node
from raycluster.cluster_config import ClusterConfig
from raycluster.evals.best import export_best, finish_evals
from raycluster.evals.keeper import evals_for_run
from raycluster.evals.plan import EvalPlan
from raycluster.faults import Faults


@dataclass(frozen=True)
class RunKeepers:
    model: object | None = None
    checkpoints: object | None = None
    part_stores: dict | None = None
    evals: object | None = None


def keepers_for_run(cluster: ClusterConfig, plan: EvalPlan | None, staging: str, curves, faults: Faults) -> RunKeepers:
    model = checkpoints = part_stores = evals = None
    if cluster.model_dir:
        model = keeper_on_this_node(cluster.model_dir, local_name_root=True, staging_dir=staging, faults=faults)
    if cluster.checkpoint_dir:
        checkpoints, part_stores = keeper_and_part_stores(
            cluster.checkpoint_dir, cluster.keep_checkpoints, staging, curves, faults
        )
        evals = evals_for_run(plan, checkpoints, curves, faults=faults)
    return RunKeepers(model, checkpoints, part_stores, evals)


def evaluated(keepers: RunKeepers, cluster: ClusterConfig, stopped: bool, staging: str) -> dict:
    """Every evaluation's outcome once the workers are done; after a normal end, the best checkpoint becomes
    the model in ``--cluster.model_dir`` (after a stop, the stopped step's model stays: a stop waits for nothing)."""
    outcome = finish_evals(keepers.evals, stopped, cluster.eval_timeout_s)
    best = outcome["best"]
    if best is not None and keepers.model is not None and not stopped:
        best = export_best(best, keepers.checkpoints, keepers.model, cluster.model_dir, staging)
    return {**outcome, "best": best}
