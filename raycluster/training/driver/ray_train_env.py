"""Ray Train's own switches that every run raycluster starts sets, each for a reason; a user's own value wins.

They are read from the driver's environment and passed on to Ray Train's controller, so they are set there
before the trainer is built.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from ray.train.constants import RAY_TRAIN_ENABLE_STATE_TRACKING as STATE_TRACKING

CONTROLLER_POLL_S = 0.5
POLL_INTERVAL = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
"""Ray Train's own setting; not exported by ``ray.train.constants``."""
PREEMPTION_WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
"""Ray Train's own switch for an actor per worker group that polls for the nodes Ray drains."""


def set_ray_train_defaults(environ: MutableMapping[str, str]) -> None:
    # The dashboard's Train view (runs, attempts, workers) is filled only when this is on.
    environ.setdefault(STATE_TRACKING, "1")
    # Ray Train's controller sees a finished or failed worker group only when it polls (every 2 s by default):
    # up to 2 s more at the end of every run and before every recovery, for a poll that costs next to nothing.
    environ.setdefault(POLL_INTERVAL, str(CONTROLLER_POLL_S))
    # The preemption watcher waits for an autoscaler's drain notice. SageMaker tells a spot interruption by
    # SIGTERM on every host, which the stop path handles, and nothing here drains a node: off, one process
    # fewer at every worker group's start and restart.
    environ.setdefault(PREEMPTION_WATCHER, "0")
