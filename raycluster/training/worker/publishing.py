"""Rank 0's end: every checkpoint published (waited for), the final model sent to the model dir, and every
checkpoint that was not published, with its cause."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import ray

from raycluster.checkpoints.transfer import send_directory
from raycluster.lerobot import api as lerobot_api
from raycluster.lerobot.api import checkpoints_dir, newest_checkpoint
from raycluster.training.phases import Phase
from raycluster.training.worker.config import WorkerConfig
from raycluster.training.worker.resume import ANSWER_S, CHECK_S, final_checkpoint
from raycluster.training.worker.shipping import Shipper, outcome

log = logging.getLogger(__name__)


def local_part_store(part_stores: dict | None):
    """This node's part store, of ``part_stores`` (node id -> part store), when there is one."""
    return (part_stores or {}).get(ray.get_runtime_context().get_node_id())


def saved_checkpoints(worker: WorkerConfig, output_dir: Path, shipper: Shipper | None) -> tuple[list[str], str | None]:
    """The keeper's complete checkpoints (or this node's, without a keeper), and why the newest local one
    is missing from them, if it is."""
    if worker.checkpoint_keeper is None:
        return sorted(p.name for p in checkpoints_dir(output_dir).glob("[0-9]*") if p.is_dir()), None
    shipper.drain()
    newest = newest_checkpoint(output_dir)
    why = outcome(worker.checkpoint_keeper, newest.name) if newest is not None else None
    published = ray.get(worker.checkpoint_keeper.complete_names.remote(), timeout=CHECK_S)  # a manifest check each
    if newest is None or newest.name in published:
        return published, None
    why = shipper.failed.get(newest.name) or why or "its upload never completed"
    return published, f"checkpoint {newest.name} was not published to the checkpoint root: {why}"


def publish_all(worker: WorkerConfig, output_dir: Path, shipper: Shipper | None, final: bool, attempt: int):
    """Rank 0's end: every checkpoint published (waited for), then the final model unless the run was
    interrupted (it has none), then the phase in the journal; the published checkpoints and why the newest is
    missing, if it is."""
    published, lost = saved_checkpoints(worker, output_dir, shipper)
    if worker.model_keeper is not None and final:
        publish_model(worker, output_dir, published if worker.checkpoint_keeper is not None else [])
    # Waited for: the driver reads the journal once this returns, and one caller's calls arrive in order.
    published_at = Phase("final_checkpoint_published", time.time(), attempt)
    ray.get(worker.journal.phase.remote(published_at), timeout=ANSWER_S)
    return published, lost


def publish_model(worker: WorkerConfig, output_dir: Path, published: list[str]) -> None:
    final = final_checkpoint(worker.checkpoint_keeper, output_dir, published, local_part_store(worker.part_stores))
    if final is None:
        log.warning("no checkpoint was saved (--save_checkpoint=false?): nothing to publish to the model dir")
    else:
        send_directory(worker.model_keeper, final / lerobot_api.PRETRAINED_MODEL, lerobot_api.PRETRAINED_MODEL)


def uploads_failed(worker: WorkerConfig, shipper: Shipper | None) -> dict[str, str]:
    """Every checkpoint that was not published, with its cause: this host's own, and the keeper's word on
    every other (a part of another host that failed, or never came)."""
    if shipper is None:
        return {}
    return {**ray.get(worker.checkpoint_keeper.failures_by_name.remote(), timeout=ANSWER_S), **shipper.failed}
