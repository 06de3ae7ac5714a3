"""The user's own tracker, LeRobot's ``--wandb.*``: LeRobot starts its W&B run on rank 0 only and logs each
logged step to it, but never finishes it, and a loop that was stopped or failed never reaches its end. The run
is finished here before Ray ends the worker process (no atexit runs then), so what rank 0 logged is all
written; a restart resumes the same run, whose id LeRobot keeps in the checkpoint's train_config.json.

The finish begins when the loop ends and runs beside the publishing of the last checkpoints; it is waited for
after them, bounded: online, W&B's finish waits for every upload (the model artifact of each save among them)."""

from __future__ import annotations

import logging
import sys
import threading
import time

log = logging.getLogger(__name__)

WAIT_S = {"done": 300.0, "failed": 30.0, "stopped": 10.0}
"""How long the end of a run waits for W&B, from the loop's end: a stop's budget belongs to its save."""
STOPPED_EXIT_CODE = 143
"""A stopped run's exit code for W&B: with ``mark_preempting`` first, a non-zero code shows it preempted."""


class TrackerEnd:
    def __init__(self) -> None:
        self._finishing: threading.Thread | None = None
        self._until = 0.0
        self._run_id = ""

    def begin(self, stopped: bool, failed: bool) -> None:
        wandb = sys.modules.get("wandb")  # never imported: LeRobot made no run
        if wandb is None or wandb.run is None:
            return
        run, how = wandb.run, "failed" if failed else "stopped" if stopped else "done"

        def finish() -> None:
            if how == "stopped":
                try:
                    run.mark_preempting()
                except Exception as exc:  # the finish matters more than the label
                    log.warning("W&B run %s not marked preempted: %s", run.id, exc)
            run.finish(exit_code={"done": 0, "failed": 1, "stopped": STOPPED_EXIT_CODE}[how])

        self._run_id, self._until = run.id, time.monotonic() + WAIT_S[how]
        self._finishing = threading.Thread(target=finish, name="wandb-finish", daemon=True)
        self._finishing.start()

    def wait(self) -> None:
        if self._finishing is None:
            return
        self._finishing.join(max(0.0, self._until - time.monotonic()))
        if self._finishing.is_alive():
            log.warning("W&B run %s not finished in time; what it had not sent is left in its run dir", self._run_id)
