"""What SageMaker runs on every host: a Ray head on the head host, a Ray worker node on the others, the
job on the head, and one clean end for all.

Exit codes: the head exits with the job driver's own code; a worker exits 0 once the head says the job
ended. Any failure writes one short reason to ``<base>/output/failure`` (SageMaker's FailureReason).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

from raycluster.bootstrap import (
    DASHBOARD_PORT,
    GCS_PORT,
    Gcs,
    NodeSpec,
    RayNode,
    gcs_reachable,
    resolve,
    wait_for,
)
from raycluster.cluster_config import split_cluster_args
from raycluster.errors import UsageError
from raycluster.sagemaker.hyperparameters import NO_JOB, EntrySettings, split_hyperparameters
from raycluster.sagemaker.network_env import collective_env, efa_available, gpu_network_env
from raycluster.sagemaker.topology import Topology, read_topology, sagemaker_base
from raycluster.submission import TERMINAL, SubmittedJob

log = logging.getLogger(__name__)

SOURCE_DIR = Path(__file__).resolve().parents[2]
SIGTERM_EXIT = 143
STOP_MARGIN_S = 10.0
"""After a SIGTERM, beyond entry.stop_timeout_s: for the stopped job to be reported and the workers told."""
AUTH_TOKEN_FILE = ".raycluster/auth_token"
AUTH_TOKEN_ENV = "RAYCLUSTER_AUTH_TOKEN_FILE"
# Where LeRobot's own output_dir lives: node-local scratch, the same path on every host (rank 0 may be
# anywhere). What must survive goes to /opt/ml through the checkpoint keeper.
SCRATCH = Path("/tmp/raycluster")


class HostFailure(Exception):
    """This host cannot go on; the message is the job's FailureReason."""


def write_failure(base: Path, reason: str) -> None:
    path = base / "output" / "failure"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(reason[:1024] + "\n")


PROBE_FLAGS = ("--cluster.num_workers", "--cluster.use_gpu", "--cluster.address", "--cluster.cpus_per_worker")


def job_script(settings: EntrySettings) -> Path | None:
    if settings.job == NO_JOB:
        return None
    script = SOURCE_DIR / settings.job
    if not script.is_file():
        raise UsageError(
            f"hyperparameter entry.job={settings.job}: no such Ray job script in the source directory {SOURCE_DIR}"
        )
    return script


def job_flags(topology: Topology, settings: EntrySettings, flags: list[str]) -> list[str]:
    """The job's flags: for the training job, defaults from the topology first and the hyperparameters
    after them (last wins); another job script gets the hyperparameters alone."""
    if settings.job != EntrySettings.job:
        return flags
    use_gpu = topology.num_gpus > 0
    training_hosts = len(topology.hosts) - (0 if settings.head_trains else 1)
    workers = training_hosts * (topology.num_gpus if use_gpu else 1)
    defaults = [
        "--cluster.address=auto",
        f"--cluster.num_workers={workers}",
        f"--cluster.use_gpu={'true' if use_gpu else 'false'}",
        f"--cluster.model_dir={topology.model_dir}",
        f"--cluster.checkpoint_dir={topology.checkpoint_dir / 'lerobot'}",
        # SageMaker uploads whatever appears under /opt/ml/checkpoints: checkpoints are assembled beside it.
        f"--cluster.staging_dir={topology.base / 'raycluster-staging'}",
        f"--output_dir={SCRATCH / 'train'}",
    ]
    if not use_gpu:
        defaults.append("--policy.device=cpu")
    if "dataset" in topology.channels:
        defaults.append(f"--dataset.root={topology.channels['dataset']}")
    return defaults + flags


def auth_env(settings: EntrySettings) -> dict[str, str]:
    """Ray token authentication with the job's one shared token. `raycluster launch` ships it with the
    code (never in hyperparameters or environment, which DescribeTrainingJob shows); the entry point
    only names the file, so the token itself is never logged. Without one the cluster does not start:
    its Jobs API would run anyone's code in the VPC as this job's role."""
    path = Path(os.environ.get(AUTH_TOKEN_ENV) or SOURCE_DIR / AUTH_TOKEN_FILE)
    if path.is_file():
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    if not settings.insecure:
        raise UsageError(
            f"no Ray auth token at {path}: ship one with the code (raycluster launch does; "
            "any 64 hex characters in .raycluster/auth_token) or, to run open to the whole VPC, "
            "set the hyperparameter entry__insecure=true"
        )
    log.warning(
        "entry.insecure=true and no Ray auth token: the cluster runs WITHOUT authentication; anyone who "
        "reaches this job's network can submit code that runs as its IAM role"
    )
    return {}


def node_env(topology: Topology) -> dict[str, str]:
    # The credentials (auth_env) are already in this process's environment, which the nodes inherit.
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_DIR), os.environ.get("PYTHONPATH")]))}
    env.update(collective_env(topology.network_interface, os.environ))
    env.update(
        gpu_network_env(
            topology.num_gpus,
            topology.network_interface,
            topology.instance_type,
            efa_available() if topology.num_gpus else False,
            os.environ,
        )
    )
    return env


def node_spec(topology: Topology, head_address: str | None, trains: bool = True) -> NodeSpec:
    return NodeSpec(
        ip=resolve(topology.current_host),
        num_cpus=topology.num_cpus if trains else 0,
        num_gpus=topology.num_gpus if trains else 0,
        temp_dir=SCRATCH / "ray",
        head_address=head_address,
        env=node_env(topology),
    )


class Head:
    def __init__(
        self, topology: Topology, settings: EntrySettings, flags: list[str], stop: threading.Event, reaper: OrphanReaper
    ):
        self.topology, self.settings, self.flags, self.stop, self.reaper = topology, settings, flags, stop, reaper
        self.ips = {host: resolve(host) for host in topology.hosts}
        self.host_of = {ip: host for host, ip in self.ips.items()}

    def run(self) -> int:
        started = time.monotonic()
        spec = node_spec(self.topology, None, trains=self.settings.head_trains)
        # Ray's job stop SIGTERMs the driver, then SIGKILLs it after RAY_JOB_STOP_WAIT_TIME_S (default 3 s):
        # the training job needs entry.stop_timeout_s to save its current step.
        spec.env["RAY_JOB_STOP_WAIT_TIME_S"] = str(int(self.settings.stop_timeout_s))
        node = RayNode(spec)
        self.reaper.own.add(node.process.pid)
        gcs = None
        code, reason = 1, None
        try:
            ip = self.ips[self.topology.current_host]
            if not wait_for(lambda: not node.alive() or gcs_reachable(ip), 60) or not node.alive():
                raise HostFailure(
                    f"the Ray head on {self.topology.current_host} did not start; see {node.spec.temp_dir}/ray-start.log"
                )
            gcs = Gcs(f"{ip}:{GCS_PORT}")
            self._wait_for_hosts(gcs)
            log.info("cluster formed: %d nodes in %.1fs", len(self.ips), time.monotonic() - started)
            script, dashboard = job_script(self.settings), f"http://127.0.0.1:{DASHBOARD_PORT}"
            failure = None
            try:
                flags = job_flags(self.topology, self.settings, self.flags)
                if self.settings.preflight:
                    probe_flags = [f for f in flags if f.startswith(PROBE_FLAGS)]
                    self._run_job(gcs, SOURCE_DIR / "jobs" / "nccl_probe.py", dashboard, started, probe_flags)
                code = self._run_job(gcs, script, dashboard, started, flags) if script else 0
            except JobFailed as exc:
                failure, code = exc, exc.code
            self._stay_interactive(gcs, dashboard, failure)
            if failure:
                raise failure
            return code
        except HostFailure as exc:
            reason = str(exc)
            raise
        finally:
            if gcs is not None:
                self._release_workers(gcs, code, reason)
            node.stop()

    def _wait_for_hosts(self, gcs: Gcs) -> None:
        expected = set(self.ips.values())
        deadline = time.monotonic() + self.settings.join_timeout_s
        while time.monotonic() < deadline and not self.stop.is_set():
            alive = self._alive(gcs)
            if expected <= alive:
                return
            time.sleep(1)
        missing = sorted(self.host_of[ip] for ip in expected - self._alive(gcs))
        if self.stop.is_set():
            raise HostFailure(f"stopped by SIGTERM while waiting for {', '.join(missing)} to join")
        raise HostFailure(
            f"host(s) {', '.join(missing)} never joined the Ray cluster within {self.settings.join_timeout_s:g}s "
            "(entry.join_timeout_s); see that host's log"
        )

    def _alive(self, gcs: Gcs) -> set[str]:
        try:
            return gcs.alive_node_ips()
        except Exception:  # the GCS briefly refusing is not a verdict
            return set()

    def _run_job(self, gcs: Gcs, script: Path, dashboard: str, started: float, flags: list[str]) -> int:
        job = SubmittedJob(dashboard, script, flags)
        expected = set(self.ips.values())
        reason, stop_deadline = None, None
        first_step = threading.Event()

        def show(line: str) -> None:
            print(f"[job] {line}", flush=True)
            if not first_step.is_set() and "step:" in line:
                first_step.set()
                log.info("first training step logged %.1fs after the entry point started", time.monotonic() - started)

        following = job.follow(show)
        while True:
            status = job.status()
            if status in TERMINAL:
                break
            if reason is None:
                alive = self._alive(gcs)
                lost = expected - alive if alive else set()  # no answer from the GCS is not a verdict
                # SageMaker stops every host at once: a worker that left on its own SIGTERM is no failure.
                if self.stop.is_set() or (lost and self.stop.wait(2)):
                    reason = "stopped by SIGTERM (job stopped or spot instance reclaimed)"
                elif lost:
                    hosts = ", ".join(sorted(self.host_of[ip] for ip in lost))
                    reason = f"host(s) {hosts} left the Ray cluster during the job"
                if reason:
                    log.error("%s; stopping the job", reason)
                    job.stop()
                    # The job supervisor SIGKILLs the driver at stop_timeout_s; a little more for it to report.
                    stop_deadline = time.monotonic() + self.settings.stop_timeout_s + STOP_MARGIN_S
            elif time.monotonic() > stop_deadline:
                log.error("the job did not stop within %.0fs", self.settings.stop_timeout_s)
                break
            time.sleep(1)
        following.join(timeout=10)
        outcome = job.outcome()
        log.info("job %s: %s, driver exit code %s", job.id, outcome.status, outcome.exit_code)
        if reason:
            said = job.failure_reason() if self.stop.is_set() else ""
            # On our own SIGTERM, the training job's last word: the step it stopped at and whether it was saved.
            # A lost host stays the reason, whatever the job did once stopped.
            raise HostFailure(
                said.split("raycluster train: ", 1)[1] if "raycluster train: stopped by" in said else reason
            )
        if outcome.status != "SUCCEEDED":
            raise JobFailed(outcome.exit_code or 1, f"job {outcome.status.lower()}: {job.failure_reason()}")
        return 0

    def _stay_interactive(self, gcs: Gcs, dashboard: str, failure: Exception | None) -> None:
        """Keep the cluster up for the user's own jobs, until the time is up, the user ends it
        (`jobs/end_cluster.py`), or SIGTERM. A failed job's exit code still ends the SageMaker job."""
        if self.settings.keep_alive_s <= 0:
            return
        log.info(
            "interactive: the cluster stays up for %.0fs%s; dashboard %s (port 8265 on algo-1); end it with "
            "`ray job submit -- python jobs/end_cluster.py`",
            self.settings.keep_alive_s,
            f" after the failed job ({failure})" if failure else "",
            dashboard,
        )
        deadline = time.monotonic() + self.settings.keep_alive_s
        while time.monotonic() < deadline and not self.stop.is_set():
            try:
                if gcs.end_requested(timeout=2):
                    log.info("interactive: ended on request")
                    return
            except Exception:
                pass
            self.stop.wait(1)
        if self.stop.is_set():
            raise HostFailure("stopped by SIGTERM (job stopped or spot instance reclaimed)")
        log.info("interactive: %.0fs are up; ending the cluster", self.settings.keep_alive_s)

    def _release_workers(self, gcs: Gcs, code: int, reason: str | None) -> None:
        """Tell the workers the job is over (and, after a SIGTERM, how it ended) and give them a moment to
        leave before the GCS goes away."""
        try:
            gcs.put_outcome({"code": code, "reason": reason})
            head_ip = self.ips[self.topology.current_host]
            wait_for(lambda: self._alive(gcs) <= {head_ip}, 20)
        except Exception as exc:
            log.warning("could not tell the workers the job ended (%s); they will see the head go", exc)


class JobFailed(Exception):
    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def run_worker(topology: Topology, settings: EntrySettings, stop: threading.Event, reaper: OrphanReaper) -> int:
    head_ip = resolve(topology.head_host)
    if not wait_for(lambda: stop.is_set() or gcs_reachable(head_ip), settings.head_wait_s):
        raise HostFailure(
            f"head {topology.head_host} ({head_ip}) did not answer within {settings.head_wait_s:g}s (entry.head_wait_s)"
        )
    if stop.is_set():
        return SIGTERM_EXIT
    node = RayNode(node_spec(topology, f"{head_ip}:{GCS_PORT}"))
    reaper.own.add(node.process.pid)
    gcs = Gcs(f"{head_ip}:{GCS_PORT}")
    unreachable_since, stop_deadline = None, None
    try:
        while True:
            if stop.is_set() and stop_deadline is None:
                # SageMaker SIGTERMs every host at once: this node stays up while the training saves its
                # current step (ranks on it take part), until the head says it is over or time is up.
                log.info(
                    "SIGTERM: staying up until the head ends the job (at most %.0fs)",
                    settings.stop_timeout_s + STOP_MARGIN_S,
                )
                stop_deadline = time.monotonic() + settings.stop_timeout_s + STOP_MARGIN_S
            if stop_deadline is not None and time.monotonic() > stop_deadline:
                raise HostFailure("stopped by SIGTERM; the head did not end the job in time")
            if not node.alive():
                if stop.is_set():
                    raise HostFailure("stopped by SIGTERM; the head ended the cluster")
                if not gcs_reachable(head_ip):  # the node leaves when it loses the head: name the cause
                    raise HostFailure(
                        f"head {topology.head_host} unreachable and this host's Ray node gone with it; "
                        "the job's head host failed"
                    )
                raise HostFailure(
                    f"the Ray node on {topology.current_host} exited (code {node.process.returncode}); "
                    f"see {node.spec.temp_dir}/ray-start.log"
                )
            try:
                outcome = gcs.outcome(timeout=2)
                unreachable_since = None
            except Exception:
                outcome = None
                unreachable_since = unreachable_since or time.monotonic()
                if time.monotonic() - unreachable_since > settings.lost_after_s:
                    if stop.is_set():  # every host was told to stop: the head leaving is no failure of its own
                        raise HostFailure("stopped by SIGTERM; the head ended the cluster") from None
                    raise HostFailure(
                        f"head {topology.head_host} unreachable for {settings.lost_after_s:g}s; "
                        "the job's head host failed"
                    ) from None
            if outcome is not None:
                log.info("the head says the job ended (code %s); leaving", outcome["code"])
                if stop.is_set():
                    raise HostFailure(
                        outcome.get("reason") or "stopped by SIGTERM (job stopped or spot instance reclaimed)"
                    )
                return 0
            time.sleep(1)
    finally:
        node.stop()


class OrphanReaper:
    """As the container's PID 1 (SageMaker's command mode execs us), orphaned grandchildren become our
    children: reap those zombies, but never our own subprocesses, which their Popen objects wait for."""

    def __init__(self) -> None:
        self.own: set[int] = set()
        if os.getpid() == 1:
            threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(2)
            for entry in os.listdir("/proc"):
                if entry.isdigit() and int(entry) not in self.own and self._is_my_zombie(entry):
                    try:
                        os.waitpid(int(entry), os.WNOHANG)
                    except ChildProcessError:
                        pass

    @staticmethod
    def _is_my_zombie(pid: str) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        return state == "Z" and ppid == "1"


def main() -> int:
    base = sagemaker_base(os.environ)
    stop = threading.Event()
    reaper = OrphanReaper()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        topology = read_topology(os.environ)
        settings, flags = split_hyperparameters(topology.hyperparameters)
        job_script(settings)
        if not settings.head_trains and len(topology.hosts) == 1:
            raise UsageError(
                "hyperparameter entry__head_trains=false needs 2 or more hosts: this job's only host "
                "is the head, so no host would train"
            )
        if settings.job == EntrySettings.job:
            split_cluster_args(
                job_flags(topology, settings, flags)
            )  # cluster.* out of range: refused before any cluster
        # This process talks to the GCS and the Jobs API too: it needs the same credentials as the nodes.
        os.environ.update(auth_env(settings))
        log.info(
            "host %s of %s; head %s; %d GPU(s), %d CPU(s)",
            topology.current_host,
            list(topology.hosts),
            topology.head_host,
            topology.num_gpus,
            topology.num_cpus,
        )
        if topology.is_head:
            code = Head(topology, settings, flags, stop, reaper).run()
        else:
            code = run_worker(topology, settings, stop, reaper)
        if code == SIGTERM_EXIT:
            write_failure(base, "stopped by SIGTERM (job stopped or spot instance reclaimed)")
        return code
    except JobFailed as exc:
        write_failure(base, str(exc))
        log.error("%s", exc)
        return exc.code
    except (UsageError, HostFailure, RuntimeError) as exc:
        write_failure(base, str(exc))
        log.error("%s", exc)
        return 143 if "SIGTERM" in str(exc) else 2 if isinstance(exc, UsageError) else 1
    except Exception as exc:  # every way out leaves a reason: an unforeseen error too, with its traceback in the log
        log.exception("unexpected error on this host")
        write_failure(base, f"unexpected error: {type(exc).__name__}: {exc}")
        return 1
