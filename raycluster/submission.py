"""A Ray job submitted through Ray's Jobs API (so it shows in the dashboard), its logs followed."""

from __future__ import annotations

import logging
import shlex
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


@dataclass(frozen=True)
class JobOutcome:
    status: str
    exit_code: int | None
    """The job driver's own exit code (``ray job submit`` only says 1 for any failure)."""
    message: str | None


class SubmittedJob:
    def __init__(self, dashboard_url: str, script: Path, flags: list[str], name: str = "raycluster"):
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(dashboard_url)
        entrypoint = shlex.join([sys.executable, "-u", str(script), *flags])
        self.id = self.client.submit_job(entrypoint=entrypoint, submission_id=f"{name}-{uuid.uuid4().hex[:8]}")
        self._printed = 0
        log.info("submitted job %s: %s", self.id, entrypoint)

    def new_logs(self) -> str:
        text = self.client.get_job_logs(self.id)
        fresh, self._printed = text[self._printed :], len(text)
        return fresh

    def status(self) -> str:
        return str(self.client.get_job_status(self.id).value)

    def stop(self) -> None:
        log.info("stopping job %s", self.id)
        self.client.stop_job(self.id)

    def outcome(self) -> JobOutcome:
        info = self.client.get_job_info(self.id)
        return JobOutcome(str(info.status.value), info.driver_exit_code, info.message)

    def failure_reason(self) -> str:
        """One useful line: our CLI's own error line if the job printed one, else its last error line."""
        lines = [line.strip() for line in self.client.get_job_logs(self.id).splitlines() if line.strip()]
        for prefix in ("raycluster train:", "Error", "error"):
            hits = [line for line in lines if prefix in line]
            if hits:
                return hits[-1]
        return lines[-1] if lines else "the job printed nothing"
