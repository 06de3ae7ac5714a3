"""How a host's part ends badly: exceptions that carry their exit code, and the one-line reason that
SageMaker shows as the job's FailureReason (``<base>/output/failure``)."""

from __future__ import annotations

from pathlib import Path

SIGTERM_REASON = "stopped by SIGTERM (job stopped or spot instance reclaimed)"


class HostFailure(Exception):
    """This host cannot go on; the message is the job's FailureReason."""

    exit_code = 1


class Stopped(HostFailure):
    """SIGTERM ended this host's part (SageMaker stopping the job, or a spot reclaim)."""

    exit_code = 143


class JobFailed(HostFailure):
    """The Ray job ended in failure; the host exits with the job driver's own code."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.exit_code = code


def write_failure(base: Path, reason: str) -> None:
    path = base / "output" / "failure"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason[:1024] + "\n")
