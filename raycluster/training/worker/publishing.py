"""Rank 0's end: every checkpoint published (waited for), and every checkpoint that was not published, with its
cause. (The model dir is filled afterwards by the driver, from the checkpoint root.)"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import ray

from raycluster.lerobot.api import checkpoints_dir, newest_checkpoint
from raycluster.training.phases import Phase
from raycluster.training.worker.config import WorkerConfig
from raycluster.training.worker.resume import ANSWER_S, CHECK_S
from raycluster.training.worker.shipping import Shipper, outcome

log = logging.getLogger(__name__)


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


def publish_all(worker: WorkerConfig, output_dir: Path, shipper: Shipper | None, attempt: int):
    """Rank 0's end: every checkpoint published (waited for), then the phase in the journal; the published
    checkpoints and why the newest is missing, if it is."""
    published, lost = saved_checkpoints(worker, output_dir, shipper)
    # Waited for: the driver reads the journal once this returns, and one caller's calls arrive in order.
    published_at = Phase("final_checkpoint_published", time.time(), attempt)
    ray.get(worker.journal.phase.remote(published_at), timeout=ANSWER_S)
    return published, lost


def uploads_failed(worker: WorkerConfig, shipper: Shipper | None) -> dict[str, str]:
    """Every checkpoint that was not published, with its cause: this host's own, and the keeper's word on
    every other (a part of another host that failed, or never came)."""
    if shipper is None:
        return {}
    return {**ray.get(worker.checkpoint_keeper.failures_by_name.remote(), timeout=ANSWER_S), **shipper.failed}
