"""The head host's part: start the Ray head, wait for every host, run the job through Ray's Jobs API,
stay up for interactive use if asked, then tell the worker hosts how it ended."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from pathlib import Path

from raycluster.bootstrap import RayNode, gcs_reachable, resolve, wait_for
from raycluster.layout import DASHBOARD_PORT, SCRATCH
from raycluster.sagemaker.cluster_state import ClusterState
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.failure import SIGTERM_REASON, HostFailure, JobFailed, Stopped
from raycluster.sagemaker.host_node import node_spec
from raycluster.sagemaker.interactive import stay_interactive
from raycluster.sagemaker.job_plan import PROBE_SCRIPT, job_script, probe_flags
from raycluster.sagemaker.members import Members
from raycluster.sagemaker.outcome import OutcomeServer
from raycluster.sagemaker.reaper import OrphanReaper
from raycluster.sagemaker.stop_budget import StopBudget
from raycluster.sagemaker.stop_clock import BoundedCall, StopClock, call_within
from raycluster.sagemaker.topology import Topology
from raycluster.submission import TERMINAL, SubmittedJob

log = logging.getLogger(__name__)

DASHBOARD = f"http://127.0.0.1:{DASHBOARD_PORT}"
GONE_AFTER_S = 5.0
"""A worker host that asked for the outcome before and has not for this long has left."""
HEAD_START_S = 60.0
"""The longest the Ray head may take to answer on its GCS port (seconds when it is well)."""
SUBMIT_S = 60.0
"""The longest the Jobs API may take to take the job (it answers within a second when it is well)."""


class Head:
    def __init__(
        self, topology: Topology, settings: EntrySettings, flags: list[str], stop: StopClock, reaper: OrphanReaper
    ):
        self.topology, self.settings, self.flags, self.stop, self.reaper = topology, settings, flags, stop, reaper
        self.ips = {host: resolve(host) for host in topology.hosts}
        self.state = ClusterState(DASHBOARD)
        self.members = Members(self.state, self.ips, stop)
        self.budget = StopBudget(settings.stop_timeout_s)
        self.node: RayNode | None = None
        self.started = time.monotonic()
        self._stepped = False

    def run(self) -> int:
        spec = node_spec(self.topology, None, self.reaper.run, trains=self.settings.head_trains)
        # Ray's job stop SIGTERMs the driver, then SIGKILLs it after RAY_JOB_STOP_WAIT_TIME_S (default 3 s):
        # the training job needs entry.stop_timeout_s to save its current step.
        spec.env["RAY_JOB_STOP_WAIT_TIME_S"] = str(math.ceil(self.settings.stop_timeout_s))  # 0.5 s is 1, not 0
        ip = self.ips[self.topology.current_host]
        outcome = OutcomeServer(ip)
        self.node = node = RayNode(spec)
        self.reaper.own.add(node.process.pid)
        formed, code, reason = False, 1, None
        try:
            started = wait_for(lambda: self.stop.is_set() or not node.alive() or gcs_reachable(ip), HEAD_START_S)
            if self.stop.is_set():
                raise Stopped(f"{SIGTERM_REASON}, while the Ray head started")
            if not started or not node.alive():
                raise HostFailure(
                    f"the Ray head on {self.topology.current_host} did not start; "
                    f"see {node.spec.temp_dir}/ray-start.log"
                )
            formed = True
            self.members.wait_for_all(self.settings.join_timeout_s)
            log.info("cluster formed: %d nodes in %.1fs", len(self.ips), time.monotonic() - self.started)
            code = self._run_jobs()
            return code
        except HostFailure as exc:
            code, reason = exc.exit_code, str(exc)
            raise
        finally:
            if formed:
                self._release_workers(outcome, code, reason)
            outcome.close()
            budget = self.budget
            node.stop(
                timeout=max(
                    1.0, min(budget.node_stop_s, self.stop.until(budget.head_node_stop_at + budget.node_stop_s))
                )
            )

    def _run_jobs(self) -> int:
        """The preflight probe if asked, then the job; a failed job's code still ends the SageMaker job
        after the interactive time."""
        script, failure, code = job_script(self.settings), None, 0
        try:
            if self.settings.preflight:
                self._run_job(PROBE_SCRIPT, probe_flags(self.flags))
            code = self._run_job(script, self.flags) if script else 0
        except JobFailed as exc:
            failure = exc
        stay_interactive(self.settings, self.state, self.stop, failure)
        if failure:
            raise failure
        return code

    def _run_job(self, script: Path, flags: list[str]) -> int:
        if self.stop.is_set():  # nothing is submitted after SIGTERM
            raise Stopped(f"{SIGTERM_REASON}, before the job started")
        # Bounded, and cut short by SIGTERM: Ray's client has no timeout of its own, and a dashboard that takes
        # connections but never answers would keep every host up until SageMaker's MaxRuntime. A job the Jobs API
        # took is stopped as any running job is, below; one it takes after we gave up ends with the head's node.
        logs = self.node.spec.temp_dir / "session_latest" / "logs"
        submitted, job = call_within(
            SUBMIT_S,
            lambda: SubmittedJob(DASHBOARD, script, flags, SCRATCH / "job-reports", logs),
            "submitting the job",
            stop=self.stop,
        )
        if not submitted and self.stop.is_set():
            raise Stopped(f"{SIGTERM_REASON}, before the job started")
        if not submitted:
            raise HostFailure(
                f"the job could not be submitted to the Ray dashboard on {self.topology.current_host} (Jobs API, "
                f"port {DASHBOARD_PORT}) within {SUBMIT_S:.0f}s; see {self.node.spec.temp_dir}/session_latest/logs/dashboard.log"
            )
        following = job.follow(self._show)
        failure, ended = self._watch(job)
        last_lines = min(self.budget.follow_s if failure else 10.0, self._left() + self.budget.follow_s)
        following.finish(job.driver_log if ended else None, timeout=max(0.0, last_lines))
        asking = min(self.budget.ask_s, self.stop.until(self.budget.outcome_by))
        answered, outcome = call_within(asking, job.outcome, "the job's outcome")
        if not answered:  # the job's own report, read from disk, still says how it ended
            outcome = job.reported_outcome()
        log.info("job %s: %s, driver exit code %s", job.id, outcome.status, outcome.exit_code)
        if isinstance(failure, Stopped):
            # On our own SIGTERM, the job's last word (the step it stopped at, whether it was saved), if it said one.
            raise Stopped(outcome.reason or str(failure))
        if failure is not None:  # a lost host stays the reason, whatever the job did once stopped
            raise failure
        if outcome.status != "SUCCEEDED":
            why = outcome.reason or call_within(self.budget.ask_s, job.last_error, "the job's log")[1] or "no report"
            raise JobFailed(outcome.exit_code or 1, f"job {outcome.status.lower()}: {why}")
        return 0

    def _watch(self, job: SubmittedJob) -> tuple[HostFailure | None, bool]:
        """Until the job ends: what made us stop it, if anything did, and whether it ended. Every Ray call is
        bounded, a Jobs API or a head node that is gone fails the job, and after a SIGTERM the whole wait ends in
        time for the workers and the nodes to stop before SageMaker's SIGKILL (the stop budget)."""
        failure, until, status_of = None, math.inf, BoundedCall(job.status, "the job's status")
        silent_since: float | None = None
        while True:
            answered, status = status_of.ask(min(self.budget.ask_s, self._left()))
            if status in TERMINAL:
                return failure, True
            silent_since = None if answered else silent_since or time.monotonic()
            if failure is None:
                failure = self.members.lost() or self._gone(silent_since)
                if failure is not None:
                    log.error("%s; stopping the job", failure)
                    # The job supervisor SIGKILLs the driver at stop_timeout_s; a little more for it to report.
                    until = time.monotonic() + self.budget.job_watched_until
                    self._stop(job)
            elif not answered and not job.driver_pids():
                return failure, True  # no Jobs API to ask, and the driver has exited: its log is whole
            if time.monotonic() > until or self._left() <= 0:
                log.error(
                    "the job did not stop within %.0fs; its nodes are stopped with it", self.settings.stop_timeout_s
                )
                return failure, False
            time.sleep(self.budget.poll_s)

    def _gone(self, silent_since: float | None) -> HostFailure | None:
        """The head's own services: its Ray node (GCS, raylet) exited, or the Jobs API stopped answering."""
        head, logs = self.topology.current_host, self.node.spec.temp_dir
        if not self.node.alive():
            cause = self.node.exit_cause()
            took = f": {cause} died, and Ray stops the whole node then" if cause else ""
            return HostFailure(f"the Ray head node on {head} exited during the job{took}; see {logs}/ray-start.log")
        # A Jobs API silent for entry.jobs_api_lost_s is gone (the dashboard died or hangs): the job cannot be
        # followed or stopped through it, and the head ends it rather than wait for SageMaker's MaxRuntime.
        lost_s = self.settings.jobs_api_lost_s
        if silent_since is not None and time.monotonic() - silent_since > lost_s:
            return HostFailure(
                f"the Ray dashboard on {head} (Jobs API, port {DASHBOARD_PORT}) has not answered for "
                f"{lost_s:g}s: the job can no longer be followed; see {logs}/session_latest/logs/dashboard.log"
            )
        return None

    def _stop(self, job: SubmittedJob) -> None:
        """Ray's job stop; when the Jobs API does not answer, SIGTERM to the driver itself, which then saves and
        reports as it would on Ray's stop."""
        if call_within(min(self.budget.ask_s, self._left()), job.stop, "stopping the job through the Jobs API")[0]:
            return
        for pid in job.driver_pids():
            log.warning("the Jobs API did not answer; SIGTERM to the job's driver (pid %d) directly", pid)
            with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
                os.kill(pid, signal.SIGTERM)

    def _left(self) -> float:
        """Seconds the job's stop may still take after a SIGTERM (the stop budget's mark); infinite before."""
        return self.stop.until(self.budget.job_watched_until)

    def _show(self, line: str) -> None:
        print(f"[job] {line}", flush=True)
        if "step:" in line and not self._stepped:
            self._stepped = True
            log.info("first training step logged %.1fs after the entry point started", time.monotonic() - self.started)

    def _release_workers(self, outcome: OutcomeServer, code: int, reason: str | None) -> None:
        """Tell the workers the job is over (and, after a SIGTERM, how it ended) and give them a moment to
        leave before the head's node goes away: until every worker host has read the outcome (or, having
        asked before, has gone silent: it is gone) and every other node has left."""
        outcome.publish({"code": code, "reason": reason})
        head_ip = self.ips[self.topology.current_host]
        workers = set(self.ips.values()) - {head_ip}

        def released() -> bool:
            now = time.monotonic()
            waiting = {ip for ip in workers - outcome.told if now - outcome.polled.get(ip, now) < GONE_AFTER_S}
            return not waiting and self.members.alive() <= {head_ip}

        wait_for(released, min(self.budget.release_s, self.stop.until(self.budget.head_node_stop_at)))
