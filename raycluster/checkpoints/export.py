"""A folder of a committed checkpoint (LeRobot's ``pretrained_model``: the policy) made a run's output: read back
from the checkpoint root the way a resume reads it, every file checked against the commit record. Checkpoints
are the one way anything is published; a model dir holds a copy of one of them, never something sent whole."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from raycluster.checkpoints.manifest import MANIFEST, manifest_of
from raycluster.checkpoints.scratch import owned_suffix, remove_orphans
from raycluster.checkpoints.store import LocalStore
from raycluster.checkpoints.transfer import fetch_directory

log = logging.getLogger(__name__)


def export_folder(keeper, name: str, folder: str, into: str, scratch: str, local=None) -> Path:
    """Make ``into/folder`` checkpoint ``name``'s ``folder``, with a record of its own files (sizes, checksums).
    It is assembled in ``scratch`` (the run's staging dir, outside ``into``: an export killed midway leaves
    nothing in the model dir SageMaker tars), then put in place by a rename over the previous one, which is
    restored if that rename fails. ``local``: this node's part store, whose files are linked, not copied.
    Raises if the checkpoint cannot be read whole."""
    remove_orphans(Path(scratch), ".export.scratch-*")  # what an export killed with its process left
    incoming = Path(scratch) / f".export{owned_suffix()}"
    Path(into).mkdir(parents=True, exist_ok=True)
    try:
        fetch_directory(keeper, name, incoming / name, local, only=folder)
        fetched = incoming / name / folder
        (fetched / MANIFEST).write_text(json.dumps(manifest_of(fetched), indent=1))
        LocalStore(Path(into)).publish(fetched, folder)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    target = Path(into) / folder
    log.info("checkpoint %s's %s exported to %s", name, folder, target)
    return target
