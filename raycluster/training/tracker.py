"""The user's own tracker, LeRobot's ``--wandb.*``: LeRobot starts its W&B run on rank 0 only and logs each
logged step to it, but never finishes it, and a loop that was stopped or failed never reaches its end. The run
is finished here, bounded, before Ray ends the worker process (no atexit runs then), so what rank 0 logged is
all written; a restart resumes the same run, whose id LeRobot keeps in the checkpoint's train_config.json."""

from __future__ import annotations

import logging
import sys
import threading

log = logging.getLogger(__name__)

FINISH_S = 30.0
"""The longest the end of a run waits for W&B: online, finish waits for every upload, and a stop must not."""


def finish_tracker(stopped: bool, failed: bool) -> None:
    wandb = sys.modules.get("wandb")  # never imported: LeRobot made no run
    if wandb is None or wandb.run is None:
        return
    run = wandb.run

    def finish() -> None:
        if stopped:  # SIGTERM or Ctrl-C: W&B shows the run as preempted, to be resumed
            run.mark_preempting()
        run.finish(exit_code=1 if failed else 0)

    finishing = threading.Thread(target=finish, name="wandb-finish", daemon=True)
    finishing.start()
    finishing.join(FINISH_S)
    if finishing.is_alive():
        log.warning(
            "W&B run %s not finished within %.0fs; what was not sent yet is left in its run dir", run.id, FINISH_S
        )
