"""A worker host's part: join the head's Ray cluster, stay until the head says the job ended (or is gone),
and leave."""

from __future__ import annotations

import logging
import time

from raycluster.bootstrap import RayNode, gcs_reachable, resolve, wait_for
from raycluster.faults import NO_FAULTS, Faults
from raycluster.layout import GCS_PORT
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.failure import SIGTERM_REASON, HostFailure, JobFailed, Stopped
from raycluster.sagemaker.host_node import node_spec
from raycluster.sagemaker.outcome import read_outcome
from raycluster.sagemaker.reaper import OrphanReaper
from raycluster.sagemaker.stop_budget import StopBudget
from raycluster.sagemaker.stop_clock import StopClock
from raycluster.sagemaker.topology import Topology

log = logging.getLogger(__name__)

HEAD_ENDED = "stopped by SIGTERM; the head ended the cluster"


class WorkerHost:
    def __init__(
        self,
        topology: Topology,
        settings: EntrySettings,
        stop: StopClock,
        reaper: OrphanReaper,
        faults: Faults = NO_FAULTS,
    ):
        self.topology, self.settings, self.stop, self.reaper, self.faults = topology, settings, stop, reaper, faults
        self.head_ip = resolve(topology.head_host)
        self.budget = StopBudget(settings.stop_timeout_s)
        self.told_of_stop = False
        self.head_ray_gone_since: float | None = None
        self.unreachable_since: float | None = None
        self.restarted = False

    def run(self) -> int:
        head, wait_s = self.topology.head_host, self.settings.head_wait_s
        if not wait_for(lambda: self.stop.is_set() or gcs_reachable(self.head_ip), wait_s):
            raise HostFailure(f"head {head} ({self.head_ip}) did not answer within {wait_s:g}s (entry.head_wait_s)")
        if self.stop.is_set():
            raise Stopped(SIGTERM_REASON)
        node = self._start_node(first=True)
        try:
            while True:
                self._check_stop()
                outcome = self._outcome()
                if outcome is None:
                    node = self._check_node(node)
                else:
                    log.info("the head says the job ended (code %s); leaving", outcome["code"])
                    # A job stopped by SIGTERM is stopped on this host too, even if its own SIGTERM was lost.
                    if self.stop.is_set() or outcome["code"] == Stopped.exit_code:
                        raise Stopped(outcome.get("reason") or SIGTERM_REASON)
                    # A failed job fails here too, with the head's code and reason: this host's log stream and
                    # status never read as a success of a job that failed.
                    if outcome["code"]:
                        raise JobFailed(outcome["code"], outcome.get("reason") or f"the job failed on {head}")
                    return 0
                time.sleep(self.budget.poll_s)
        finally:
            node.stop(timeout=max(1.0, min(self.budget.node_stop_s, self.stop.left() - self.budget.exit_s)))

    def _check_stop(self) -> None:
        if self.stop.is_set() and not self.told_of_stop:
            # SageMaker SIGTERMs every host at once: this node stays up while the training saves its current
            # step (ranks on it take part), until the head says it is over, which the stop budget has it do in
            # time, or until this host must stop its node to beat SIGKILL.
            self.told_of_stop = True
            log.info(
                "SIGTERM: staying up until the head ends the job (at most %.0fs)",
                self.stop.until(self.budget.worker_gives_up_at),
            )
        if self.stop.until(self.budget.worker_gives_up_at) <= 0:
            raise Stopped("stopped by SIGTERM; the head did not end the job in time")

    def _start_node(self, first: bool) -> RayNode:
        extra = self.faults.ray_start_args(self.topology.current_host, first)
        node = RayNode(node_spec(self.topology, f"{self.head_ip}:{GCS_PORT}", self.reaper.run), extra)
        self.reaper.own.add(node.process.pid)
        return node

    def _check_node(self, node: RayNode) -> RayNode:
        """The node, or the one started in its place; raises once this host's node is gone for good."""
        if node.alive():
            return node
        if self.stop.is_set():
            raise Stopped(HEAD_ENDED)
        if not gcs_reachable(self.head_ip):
            # This node left with the head's Ray (a head node stops whole when one of its processes dies). The
            # head's entry point, which serves the outcome apart from Ray, is deciding how the job ended: its
            # word is awaited as long as the stop budget gives it to publish one (a silent head fails sooner).
            self.head_ray_gone_since = self.head_ray_gone_since or time.monotonic()
            if time.monotonic() - self.head_ray_gone_since <= self.budget.outcome_by:
                return node
            raise HostFailure(
                f"head {self.topology.head_host}'s Ray is gone, and this host's Ray node with it; the head said "
                f"nothing of the job within {self.budget.outcome_by:.0f}s"
            )
        if not node.started() and not self.restarted:
            # Ray's `ray start` waits a fixed 30 s for its raylet to register with the head: a host on a busy
            # machine, or a head that many hosts join at once, can miss it. That node never joined: it is
            # started again, once (the head still waits for it, up to entry.join_timeout_s).
            self.restarted = True
            log.warning(
                "the Ray node on %s exited (code %s) before it joined the cluster (%s): starting it again, once",
                self.topology.current_host,
                node.process.returncode,
                node.last_words(),
            )
            node.stop(
                timeout=self.budget.node_stop_s
            )  # its process group: a raylet left running would join as a second node
            return self._start_node(first=False)
        raise HostFailure(
            f"the Ray node on {self.topology.current_host} exited (code {node.process.returncode}); "
            f"see {node.spec.temp_dir}/ray-start.log"
        )

    def _outcome(self) -> dict | None:
        """The head's word, if it has spoken; a head silent for longer than entry.lost_after_s has failed."""
        try:
            outcome = read_outcome(self.head_ip, timeout=self.budget.read_s)
            self.unreachable_since = None
            return outcome
        except OSError:
            self.unreachable_since = self.unreachable_since or time.monotonic()
            if time.monotonic() - self.unreachable_since <= self.settings.lost_after_s:
                return None
            if self.stop.is_set():  # every host was told to stop: the head leaving is no failure of its own
                raise Stopped(HEAD_ENDED) from None
            raise HostFailure(
                f"head {self.topology.head_host} unreachable for {self.settings.lost_after_s:g}s; "
                "the job's head host failed"
            ) from None
