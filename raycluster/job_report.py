"""A job's last word, structured: the driver's exit code and a one-line reason, written by the job to the
file its submitter named in ``RAYCLUSTER_JOB_REPORT`` (Ray's job info carries only "exit code N")."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

REPORT_ENV = "RAYCLUSTER_JOB_REPORT"


@dataclass(frozen=True)
class JobReport:
    exit_code: int
    reason: str | None
    """One line for a person: why the job stopped or failed; None when it succeeded."""


def write_report(report: JobReport) -> None:
    """Where the submitter asked for one (a job run without one, by hand, writes nothing)."""
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(asdict(report)))


def read_report(path: Path) -> JobReport | None:
    try:
        return JobReport(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
