"""The head's view of which hosts are in the Ray cluster: every host joined (bounded by ``entry.join_timeout_s``),
and, during the job, whether one left. The dashboard's word on the nodes alive is the source; no answer from it is
never a verdict."""

from __future__ import annotations

import logging
import time

from raycluster.sagemaker.cluster_state import ClusterState
from raycluster.sagemaker.failure import SIGTERM_REASON, HostFailure, Stopped
from raycluster.sagemaker.stop_clock import StopClock

log = logging.getLogger(__name__)


class Members:
    def __init__(self, state: ClusterState, ips: dict[str, str], stop: StopClock):
        """``ips``: every host of the job, by name, as its address."""
        self.state, self.ips, self.stop = state, ips, stop
        self.host_of = {ip: host for host, ip in ips.items()}

    def wait_for_all(self, timeout_s: float) -> None:
        """Returns once every host's node is alive; a host missing after ``timeout_s`` is named."""
        expected = set(self.ips.values())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            if expected <= self.alive():
                return
            self.stop.wait(1)  # returns at a SIGTERM
        missing = ", ".join(sorted(self.host_of[ip] for ip in expected - self.alive()))
        if self.stop.is_set():
            raise Stopped(f"stopped by SIGTERM while waiting for {missing} to join")
        raise HostFailure(
            f"host(s) {missing} never joined the Ray cluster within {timeout_s:g}s (entry.join_timeout_s); "
            "see that host's log"
        )

    def alive(self) -> set[str]:
        try:
            return self.state.alive_node_ips()
        except Exception as exc:  # the dashboard briefly not answering is not a verdict
            log.debug("no answer from the dashboard: %s", exc)
            return set()

    def lost(self) -> HostFailure | None:
        """Why the job must stop now, if it must: our own SIGTERM, or a host that left the cluster."""
        if self.stop.is_set():  # first, before asking the dashboard anything
            return Stopped(SIGTERM_REASON)
        alive = self.alive()
        lost = set(self.ips.values()) - alive if alive else set()  # no answer is not a verdict
        # SageMaker stops every host at once: a worker that left on its own SIGTERM is no failure.
        if lost and self.stop.wait(2):
            return Stopped(SIGTERM_REASON)
        if lost:
            hosts = ", ".join(sorted(self.host_of[ip] for ip in lost))
            return HostFailure(f"host(s) {hosts} left the Ray cluster during the job")
        return None
