"""What a rank prints, made for a person reading a log file (CloudWatch, a job's log): LeRobot's tqdm bar,
which under Ray becomes one line per step, is one line every ``PROGRESS_EVERY_S`` instead; Ray Train's line
for every ``ray.train.report`` is dropped (the step lines LeRobot logs say the same, and more)."""

from __future__ import annotations

import io
import logging
import sys

from tqdm import tqdm

PROGRESS_EVERY_S = 30.0
REPORT_MODULE = "ray.train.v2._internal.execution.context"
"""Where Ray Train logs every report; its logger is named by the module's file, not by the module."""
REPORT_LINE = "Reporting training result"

log = logging.getLogger("raycluster.progress")


class _LogLines(io.TextIOBase):
    """tqdm's output as log lines: each refresh (``\\r...``) one line, blank ones dropped."""

    def write(self, text: str) -> int:
        if line := text.strip("\r\n "):
            log.info("%s", line)
        return len(text)


class LoggedProgress(tqdm):
    """LeRobot's own bar (its total, its rate, its ETA), refreshed at most every ``PROGRESS_EVERY_S``."""

    def __init__(self, *args, **kwargs):
        kwargs.update(file=_LogLines(), mininterval=PROGRESS_EVERY_S, maxinterval=PROGRESS_EVERY_S, ascii=True)
        kwargs.setdefault("ncols", 100)
        super().__init__(*args, **kwargs)


def rank_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    reporter = sys.modules.get(REPORT_MODULE)  # imported already: it runs this rank's training function
    if reporter is not None:  # a Ray Train that logs elsewhere: test_log_lines says so
        logging.getLogger(reporter.__file__).addFilter(lambda record: not record.getMessage().startswith(REPORT_LINE))
