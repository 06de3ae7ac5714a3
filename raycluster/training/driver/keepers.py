"""The actors a run publishes through, all on the driver's node: the checkpoints' keeper (with a part store on
every node) and the evaluations' keeper; and what the driver does with them at the end: the model dir gets the
best checkpoint's policy, or the last one's, read back from the checkpoint root."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import ray

from raycluster.checkpoints.export import export_folder
from raycluster.checkpoints.keeper import keeper_and_part_stores
from raycluster.checkpoints.part_store import local_part_store
from raycluster.cluster_config import ClusterConfig
from raycluster.evals.best import export_best
from raycluster.evals.keeper import evals_for_run
from raycluster.evals.plan import EvalPlan
from raycluster.faults import NO_FAULTS, Faults
from raycluster.lerobot.api import PRETRAINED_MODEL

log = logging.getLogger(__name__)

LIST_S = 120.0
"""The keeper's list of complete checkpoints (a manifest check of each not yet checked)."""
EXPORT_TRIES = 2
"""A model export that failed (a host slow to serve a chunk) is tried once more before the run fails for it."""


@dataclass(frozen=True)
class RunKeepers:
    checkpoints: object | None = None
    part_stores: dict | None = None
    evals: object | None = None


def keepers_for_run(cluster: ClusterConfig, plan: EvalPlan | None, staging: str, curves, faults: Faults) -> RunKeepers:
    if not cluster.checkpoint_dir:
        return RunKeepers()
    checkpoints, part_stores = keeper_and_part_stores(
        cluster.checkpoint_dir, cluster.keep_checkpoints, staging, curves, faults
    )
    return RunKeepers(checkpoints, part_stores, evals_for_run(plan, checkpoints, curves, faults=faults))


def publish_model(
    outcome: dict, keepers: RunKeepers, cluster: ClusterConfig, stopped: bool, staging: str, faults: Faults = NO_FAULTS
) -> dict:
    """After a normal end, the model in ``--cluster.model_dir`` is the best checkpoint's policy, or the newest
    committed one's (after a stop, none is exported: a stop waits for nothing); ``outcome`` (``finish_evals``')
    with the best's export.
    Exports are assembled in ``staging``."""
    if stopped or not cluster.model_dir:
        return outcome
    local, best = local_part_store(keepers.part_stores), outcome["best"]
    if best is not None:
        best = export_best(best, keepers.checkpoints, cluster.model_dir, staging, local)
        if best["exported_to"] is not None:
            return {**outcome, "best": best}
    export_last(keepers.checkpoints, cluster.model_dir, staging, local, faults)
    return {**outcome, "best": best}


def export_last(keeper, model_dir: str, staging: str, local, faults: Faults = NO_FAULTS) -> None:
    """The newest committed checkpoint's policy into ``model_dir`` (if the run's last save was not published,
    that is an older one, and the run fails for the lost save); raises if it cannot be read whole twice (the
    run's model is its output: a run that cannot deliver it fails)."""
    names = ray.get(keeper.complete_names.remote(), timeout=LIST_S)
    if not names:
        log.warning("no checkpoint was saved (--save_checkpoint=false?): nothing to publish to the model dir")
        return
    faults.delay_publish(f"the model (checkpoint {names[-1]})")
    for tried in range(1, EXPORT_TRIES + 1):
        try:
            export_folder(keeper, names[-1], PRETRAINED_MODEL, model_dir, staging, local)
            return
        except Exception as exc:
            if tried == EXPORT_TRIES:
                raise RuntimeError(
                    f"checkpoint {names[-1]}'s policy could not be exported to {model_dir}: {exc}"
                ) from exc
            log.warning("checkpoint %s's policy not exported (%s): trying once more", names[-1], exc)
