"""A Ray job submitted through Ray's Jobs API (so it shows in the dashboard), its logs followed."""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import shlex
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raycluster.job_report import REPORT_ENV, read_report

log = logging.getLogger(__name__)

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


@dataclass(frozen=True)
class JobOutcome:
    status: str
    exit_code: int | None
    """The job driver's own exit code (``ray job submit`` only says 1 for any failure)."""
    reason: str | None
    """The job's own one-line reason (its ``JobReport``), when it wrote one."""


REST_LINES = 1000
"""The most lines an ended job's rest shows from its file: a tail that broke early leaves a long log unshown,
and a stop has seconds for its last lines, not the time to print gigabytes."""


class FollowedLog:
    """A job's log shown a line at a time: from Ray's websocket tail while the job runs, and once it has ended,
    the rest from the driver's log file on this node, which Ray writes and which is whole once the driver has
    exited. Ray's tail notices a job's end only 2-5 s after it (it looks at the file and at the job's status once
    a second each), and every job's end, a failed one's last lines above all, would wait for that."""

    def __init__(self, on_line: Callable[[str], None]):
        self._on_line, self._shown, self._done, self._lock = on_line, 0, False, threading.Lock()
        self.thread: threading.Thread | None = None
        self.complete = False
        """The tail itself reached the job's end: every line was shown."""

    def show(self, line: str) -> None:
        """A line from the tail; none once the rest came from the file."""
        with self._lock:
            if not self._done:
                self._shown += 1
                self._on_line(line)

    def finish(self, log_file: Path | None, timeout: float) -> None:
        """The job's last lines: those the tail has not shown, from ``log_file`` (the ended job's, on this node;
        the last ``REST_LINES`` of them), or, with no such file or one that cannot be read, what the tail
        brings within ``timeout``."""
        if self.complete:
            return
        if log_file is not None and log_file.is_file():
            try:
                self._rest_from(log_file)
                return
            except Exception as exc:  # the tail goes on instead
                log.warning("the job's log %s could not be read to its end: %s", log_file, exc)
        if self.thread is not None:
            self.thread.join(timeout)

    def _rest_from(self, log_file: Path) -> None:
        with self._lock:
            # Read as Ray's tail reads it (text, universal newlines), so that its lines and the file's are one count.
            rest: collections.deque[str] = collections.deque(maxlen=REST_LINES)
            unshown = 0
            with open(log_file, errors="replace") as lines:
                for line in itertools.islice(lines, self._shown, None):
                    rest.append(line)
                    unshown += 1
            self._done = True
            if unshown > len(rest):
                self._on_line(f"({unshown - len(rest)} lines not shown here: the job's whole log is {log_file})")
            for line in rest:
                self._on_line(line.rstrip("\n"))


class SubmittedJob:
    def __init__(
        self,
        dashboard_url: str,
        script: Path,
        flags: list[str],
        reports: Path,
        driver_logs: Path,
        name: str = "raycluster",
    ):
        """``reports``: a directory on this node, where the driver (which Ray runs on the head) writes its report.
        ``driver_logs``: where Ray writes the driver's log on this node (the session's ``logs``)."""
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(dashboard_url)
        self.argv = [sys.executable, "-u", str(script), *flags]
        entrypoint = shlex.join(self.argv)
        submission_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self.report = reports / f"{submission_id}.json"
        self.driver_log = driver_logs / f"job-driver-{submission_id}.log"
        runtime_env = {"env_vars": {REPORT_ENV: str(self.report)}}
        self.id = self.client.submit_job(entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env)
        log.info("submitted job %s: %s", self.id, entrypoint)

    def follow(self, on_line: Callable[[str], None]) -> FollowedLog:
        """Stream the job's log to ``on_line`` a line at a time, through Ray's own websocket tail (each byte is
        sent once, however long the job); ``finish`` it for the last lines."""
        followed = FollowedLog(on_line)

        async def tail() -> None:
            partial = ""
            async for chunk in self.client.tail_job_logs(self.id):
                *lines, partial = (partial + chunk).split("\n")
                for line in lines:
                    followed.show(line)
            if partial:
                followed.show(partial)

        def run() -> None:
            try:
                asyncio.run(tail())
                followed.complete = True
            except Exception as exc:  # the job goes on; its whole log stays in the dashboard
                log.warning("following job %s's log stopped: %s", self.id, exc)

        followed.thread = threading.Thread(target=run, name=f"log-{self.id}", daemon=True)
        followed.thread.start()
        return followed

    def status(self) -> str:
        return str(self.client.get_job_status(self.id).value)

    def stop(self) -> None:
        log.info("stopping job %s", self.id)
        self.client.stop_job(self.id)

    def outcome(self) -> JobOutcome:
        info = self.client.get_job_info(self.id)
        return JobOutcome(str(info.status.value), info.driver_exit_code, self.reported_reason())

    def reported_outcome(self) -> JobOutcome:
        """How the job ended by its own report alone (no Ray call): for when the Jobs API cannot say."""
        report = read_report(self.report)
        if report is None:
            return JobOutcome("UNKNOWN", None, None)
        return JobOutcome("SUCCEEDED" if report.exit_code == 0 else "FAILED", report.exit_code, report.reason)

    def reported_reason(self) -> str | None:
        """The job's own one-line reason, read from its report on this node: no Ray call."""
        report = read_report(self.report)
        return report.reason if report else None

    def driver_pids(self) -> list[int]:
        """The job driver's process on this node (Ray runs it on the head): its command line, and this job's
        report path in its environment (the job's actors have that too, under other command lines). The way to
        reach the driver when the Jobs API does not answer."""
        marker, argv = f"{REPORT_ENV}={self.report}".encode(), [arg.encode() for arg in self.argv]
        pids = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if (proc / "cmdline").read_bytes().split(b"\0")[: len(argv)] == argv and marker in (
                    proc / "environ"
                ).read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:  # gone meanwhile, or not ours to read
                continue
        return pids

    def last_error(self) -> str:
        """For a job that wrote no report (a user's own script): its last error line, else its last line."""
        lines = [line.strip() for line in self.client.get_job_logs(self.id).splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line]
        return (errors or lines or ["the job printed nothing"])[-1]
