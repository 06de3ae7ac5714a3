"""Interactive mode on the head: the cluster stays up for the user's own jobs after the job (or with none)."""

from __future__ import annotations

import logging
import time

from raycluster.layout import DASHBOARD_PORT
from raycluster.sagemaker.cluster_state import ClusterState
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.failure import SIGTERM_REASON, Stopped
from raycluster.sagemaker.stop_clock import StopClock

log = logging.getLogger(__name__)


def stay_interactive(settings: EntrySettings, state: ClusterState, stop: StopClock, failure: Exception | None) -> None:
    """Until the time is up, the user ends it (`jobs/end_cluster.py`), or SIGTERM."""
    if settings.keep_alive_s <= 0:
        return
    log.info(
        "interactive: the cluster stays up for %.0fs%s; dashboard %s (port %d on algo-1); end it with "
        "`ray job submit -- python jobs/end_cluster.py`",
        settings.keep_alive_s,
        f" after the failed job ({failure})" if failure else "",
        state.address,
        DASHBOARD_PORT,
    )
    deadline = time.monotonic() + settings.keep_alive_s
    while time.monotonic() < deadline and not stop.is_set():
        try:
            if state.end_requested(timeout=2):
                log.info("interactive: ended on request")
                return
        except Exception:  # the dashboard briefly not answering
            pass
        stop.wait(1)
    if stop.is_set():
        raise Stopped(SIGTERM_REASON)
    log.info("interactive: %.0fs are up; ending the cluster", settings.keep_alive_s)
