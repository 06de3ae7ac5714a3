"""A test's checkpoints published the one way training publishes them: a host's part store stages the saved
directory (all of it, one part), the keeper commits it once it is placed."""

from __future__ import annotations

from pathlib import Path

import ray

from raycluster.checkpoints.keeper import CheckpointKeeper
from raycluster.checkpoints.part_store import PartStore
from raycluster.training.worker.shipping import outcome


class OneHost:
    """A keeper of ``root`` and the part store of its one host, as ``keeper_and_part_stores`` makes them on a
    one-node cluster (``options``: the actors' Ray options, an S3 endpoint's variables, say)."""

    def __init__(self, root: str, staging: Path, keep: int = 0, options: dict | None = None, **keeper_args):
        self.keeper = CheckpointKeeper.options(**(options or {})).remote(root, keep, **keeper_args)
        self.store = PartStore.options(**(options or {})).remote(root, str(staging), self.keeper)
        ray.get(self.keeper.attach.remote([self.store]), timeout=60)

    def publish(self, source: Path, name: str, attempt: int = 1) -> None:
        """``source`` committed as checkpoint ``name``; raises with the keeper's reason if it was not."""
        ray.get(self.store.stage.remote(name, attempt, 0, 1, str(source)), timeout=120)
        why = outcome(self.keeper, name, deadline_s=60)
        if why is not None:
            raise RuntimeError(f"checkpoint {name} was not published: {why}")
