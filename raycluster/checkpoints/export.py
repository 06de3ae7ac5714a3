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
from raycluster.checkpoints.transfer import fetch_directory

log = logging.getLogger(__name__)


def export_folder(keeper, name: str, folder: str, into: str, local=None) -> Path:
    """Make ``into/folder`` checkpoint ``name``'s ``folder``, with a record of its own files (sizes, checksums),
    replacing what was there only once the new one is whole (a reader, or SageMaker's tar of the model dir,
    never sees half of one). ``local``: this node's part store, whose files are linked rather than copied.
    Raises if the checkpoint cannot be read whole."""
    into_path = Path(into)
    into_path.mkdir(parents=True, exist_ok=True)
    # What an export killed with its process left here goes first: this folder is the job's output.
    remove_orphans(into_path, ".export.scratch-*")
    incoming = into_path / f".export{owned_suffix()}"
    target = into_path / folder
    try:
        fetch_directory(keeper, name, incoming / name, local, only=folder)
        fetched = incoming / name / folder
        (fetched / MANIFEST).write_text(json.dumps(manifest_of(fetched), indent=1))
        if target.exists():
            target.rename(incoming / "replaced")
        fetched.rename(target)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    log.info("checkpoint %s's %s exported to %s", name, folder, target)
    return target
