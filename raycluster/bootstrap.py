"""Ray nodes of a multi-host cluster: started with ``ray start --block`` as child processes, stopped by
their PID (never by name: Ray's own stop command kills every Ray process on the machine, other clusters' too)."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from raycluster.layout import DASHBOARD_PORT, GCS_PORT

log = logging.getLogger(__name__)

# Ray's default node-death detection takes ~30 s and a worker waits 60 s for a lost GCS: too slow for a
# job that must fail fast with the host's name, so both are shortened on every node we start.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""The colours ``ray start`` writes into its log."""
FAST_FAILURE_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_gcs_rpc_server_reconnect_timeout_s": "10",
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
}


def resolve(host: str) -> str:
    """A host's address from its name (``/etc/hosts`` on SageMaker); never ``gethostname()``, which under
    SageMaker's v3 driver is not ``algo-N``."""
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise RuntimeError(f"cannot resolve host {host}: {exc}") from None


def object_store_bytes(shm: Path = Path("/dev/shm"), share: float = 0.5) -> int:
    """Ray's object store lives in /dev/shm, which containers often make small: size it from what is free
    there rather than from RAM, leaving room for PyTorch's DataLoader workers, which also use /dev/shm."""
    free = shutil.disk_usage(shm).free
    return max(int(free * share), 80 * 1024**2)


@dataclass(frozen=True)
class NodeSpec:
    ip: str
    num_cpus: int
    num_gpus: int
    temp_dir: Path
    head_address: str | None = None
    """``IP:PORT`` of the head's GCS; None starts a head."""
    object_store_bytes: int = field(default_factory=object_store_bytes)
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, float] = field(default_factory=dict)
    """Custom resources this node offers (``--resources``): its instance group's, on SageMaker."""
    dashboard_host: str = "127.0.0.1"
    """Loopback: on SageMaker, SSM port forwarding arrives there, and nothing else in the VPC reaches the
    Jobs API (code execution as the job's role). Ray binds its other servers to all interfaces itself."""

    def command(self) -> list[str]:
        ray = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray if ray.exists() else shutil.which("ray") or "ray"),
            "start",
            "--block",
            f"--node-ip-address={self.ip}",
            f"--num-cpus={self.num_cpus}",
            f"--num-gpus={self.num_gpus}",
            f"--temp-dir={self.temp_dir}",
            f"--object-store-memory={self.object_store_bytes}",
            "--disable-usage-stats",
        ]
        if self.resources:
            cmd += [f"--resources={json.dumps(self.resources)}"]
        if self.head_address is None:
            cmd += [
                "--head",
                f"--port={GCS_PORT}",
                f"--dashboard-host={self.dashboard_host}",
                f"--dashboard-port={DASHBOARD_PORT}",
            ]
        else:
            cmd += [f"--address={self.head_address}"]
        return cmd


class RayNode:
    """One ``ray start --block`` process; its process group holds exactly this node's Ray processes."""

    def __init__(self, spec: NodeSpec, extra_args: list[str] | None = None):
        self.spec = spec
        spec.temp_dir.mkdir(parents=True, exist_ok=True)
        # The temp files of every process on this node (multiprocessing's pymp-*, a killed worker's leftovers)
        # stay inside the node's temp dir, not scattered over /tmp.
        scratch = spec.temp_dir / "tmp"
        scratch.mkdir(exist_ok=True)
        log_path = spec.temp_dir / "ray-start.log"
        self._log = log_path.open("ab")
        self._log_from = self._log.tell()  # what an earlier node of this temp dir wrote is not this one's
        self.process = subprocess.Popen(
            spec.command() + (extra_args or []),
            env={**os.environ, **FAST_FAILURE_ENV, "TMPDIR": str(scratch), **spec.env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.info("ray node starting on %s (pid %d, log %s)", spec.ip, self.process.pid, log_path)

    def alive(self) -> bool:
        return self.process.poll() is None

    def _log_text(self) -> str:
        try:
            with (self.spec.temp_dir / "ray-start.log").open("rb") as f:
                f.seek(self._log_from)
                return ANSI.sub("", f.read().decode(errors="replace"))
        except OSError:
            return ""

    def started(self) -> bool:
        """``ray start`` said its node is up (it had registered with the GCS)."""
        return "Ray runtime started." in self._log_text()

    def last_words(self) -> str:
        """The last line ``ray start`` wrote: why a node that never started did not."""
        lines = [line.strip() for line in self._log_text().splitlines() if line.strip()]
        return lines[-1][:300] if lines else "it wrote nothing"

    def exit_cause(self) -> str:
        """Which of its processes took the node down, as ``ray start --block`` logs it (it then stops every
        other process of the node): ``dashboard (exit code -9)``; empty when it said nothing of the kind."""
        _, said, after = self._log_text().partition("Some Ray subprocesses exited unexpectedly")
        died = re.findall(r"-- (\S+) \[exit code=(-?\d+)\]", after) if said else []
        return ", ".join(f"{name} (exit code {code})" for name, code in died)

    def stop(self, timeout: float = 20.0) -> None:
        stop_node_process(self.process.pid, timeout, wait=self.process.wait)
        self._log.close()
        log.info("ray node on %s stopped", self.spec.ip)


def stop_node_process(pid: int, timeout: float = 20.0, wait=None) -> None:
    """SIGTERM a ``ray start --block`` process (it then stops its own Ray processes), then SIGKILL its
    process group, which holds exactly that node's processes. ``wait`` reaps it when it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _running(pid):
        if wait is not None:
            try:
                wait(0.2)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if wait is not None:  # after SIGKILL: it ends unless stuck in the kernel, which no timeout here would mend
        wait()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gcs_reachable(ip: str, port: int = GCS_PORT, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for(predicate, timeout: float, interval: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
