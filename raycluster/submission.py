"""A Ray job submitted through Ray's Jobs API (so it shows in the dashboard), its logs followed."""

from __future__ import annotations

import asyncio
import logging
import shlex
import sys
import threading
import uuid
from collections.abc import Callable
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
        log.info("submitted job %s: %s", self.id, entrypoint)

    def follow(self, on_line: Callable[[str], None]) -> threading.Thread:
        """Stream the job's log to ``on_line`` a line at a time until the job ends, through Ray's own
        websocket tail (each byte is sent once, however long the job). Join the thread for the last lines."""

        async def tail() -> None:
            partial = ""
            async for chunk in self.client.tail_job_logs(self.id):
                *lines, partial = (partial + chunk).split("\n")
                for line in lines:
                    on_line(line)
            if partial:
                on_line(partial)

        def run() -> None:
            try:
                asyncio.run(tail())
            except Exception as exc:  # the job goes on; its whole log stays in the dashboard
                log.warning("following job %s's log stopped: %s", self.id, exc)

        thread = threading.Thread(target=run, name=f"log-{self.id}", daemon=True)
        thread.start()
        return thread

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
