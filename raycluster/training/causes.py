"""Why a Ray Train run failed, in one line."""

from __future__ import annotations

import ray
from ray.train import ControllerError, WorkerGroupError


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


def failure_cause(exc: BaseException, board) -> str:
    """A group the watchdog ended for a hang failed for that hang, whatever its ranks raised as they went."""
    hangs = ray.get(board.hangs.remote(), timeout=30) if board is not None else []
    return hangs[-1] if hangs else root_cause(exc)
