"""The end of a run's evaluations, on the driver: every outcome, and the best checkpoint exported as the model."""

from __future__ import annotations

import logging

import ray

from raycluster.checkpoints.export import export_folder
from raycluster.lerobot.api import PRETRAINED_MODEL

log = logging.getLogger(__name__)

NONE = {"evaluations": [], "best": None}
STOPPED_S = 15.0
"""A stopped run's wait for the evaluations' outcomes: inside the driver's stop budget, beside its save's."""


def finish_evals(evals, stopped: bool, timeout_s: float) -> dict:
    """``{"evaluations": [...], "best": {...} | None}`` (see ``EvalKeeper.finish``); never raises: evaluations
    never fail a run."""
    if evals is None:
        return NONE
    try:
        return ray.get(evals.finish.remote(stopped), timeout=STOPPED_S if stopped else timeout_s + 180)
    except Exception as exc:
        log.warning("the evaluations' outcomes could not be collected: %s", exc)
        return NONE


def export_best(best: dict, checkpoint_keeper, model_dir: str, staging: str, local=None) -> dict:
    """Make the best checkpoint's ``pretrained_model`` the run's model, in ``model_dir`` (assembled in
    ``staging``); the entry with where it went, or with why it did not (the caller then exports the last
    checkpoint's). ``local``: this node's part store."""
    name = best["checkpoint"]
    try:
        exported = export_folder(checkpoint_keeper, name, PRETRAINED_MODEL, model_dir, staging, local)
    except Exception as exc:
        log.error("the best checkpoint %s could not be exported to %s: %s", name, model_dir, exc)
        return {**best, "exported_to": None, "export_error": str(exc)}
    log.info("best checkpoint %s (%s %.4g) exported to %s", name, best["metric"], best["value"], exported)
    return {**best, "exported_to": str(exported)}
