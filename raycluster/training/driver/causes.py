"""Why a Ray Train run failed, in one line."""

from __future__ import annotations

import logging

import ray
from ray.train import ControllerError, WorkerGroupError

log = logging.getLogger(__name__)


def root_cause(exc: BaseException) -> str:
    """One line naming what failed, from the errors Ray Train raises: the lowest rank's own exception for
    a worker group failure (Ray's wrapper peeled off), the controller's for a controller failure."""
    if isinstance(exc, WorkerGroupError) and exc.worker_failures:
        rank, failure = min(exc.worker_failures.items())
        return f"rank {rank}: {root_cause(failure)}"
    if isinstance(exc, ControllerError):
        return root_cause(exc.controller_failure)
    cause = getattr(exc, "cause", None)  # a RayTaskError carries the task's own exception
    if isinstance(cause, BaseException):
        return root_cause(cause)
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_cause(exc: BaseException, journal) -> str:
    """A group the watchdog ended for a hang failed for that hang, whatever its ranks raised as they went:
    the last group's hang, if it hung (an earlier group's was recovered from)."""
    try:
        hang = ray.get(journal.newest_hang.remote(), timeout=10)
        if hang:
            return hang
    except Exception as error:  # the run's actors gone with the failure: Ray's own word stands
        log.warning("the run's journal did not answer: %s", error)
    return root_cause(exc)
