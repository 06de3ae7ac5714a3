"""``raycluster up`` / ``down``: a local Ray head for the same jobs that run inside SageMaker, with token
authentication on, stopped by its PID (never by name, which would stop other clusters too)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from raycluster.auth import new_token
from raycluster.bootstrap import NodeSpec, RayNode, gcs_reachable, stop_node_process, wait_for
from raycluster.errors import UsageError
from raycluster.layout import DASHBOARD_AGENT_PORT, DASHBOARD_PORT, GCS_PORT

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path.home() / ".raycluster" / "local"


@dataclass(frozen=True)
class LocalCluster:
    pid: int
    address: str
    dashboard_url: str
    token_path: str
    temp_dir: str

    def client_env(self) -> dict[str, str]:
        """What a shell, a driver or `ray job submit` needs to be let in."""
        return {"RAY_ADDRESS": self.dashboard_url, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": self.token_path}


def state_file(state_dir: Path) -> Path:
    return state_dir / "cluster.json"


def up(state_dir: Path, num_cpus: int | None, num_gpus: int, ip: str = "127.0.0.1") -> LocalCluster:
    if state_file(state_dir).exists():
        raise UsageError(f"a cluster started from {state_dir} is already up; `raycluster down` first")
    state_dir.mkdir(parents=True, exist_ok=True)
    token = state_dir / "auth_token"
    if not token.exists():
        new_token(token)
    # Ray's socket paths live under its temp dir and may not exceed 107 bytes: keep it short.
    temp_dir = (
        Path(tempfile.gettempdir()) / f"raycluster-{hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:10]}"
    )
    spec = NodeSpec(
        ip=ip,
        num_cpus=num_cpus or os.cpu_count() or 1,
        num_gpus=num_gpus,
        temp_dir=temp_dir,
        dashboard_host=ip,
        env={
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            # `python` in a submitted job is this environment's python.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )
    node = RayNode(spec)
    # Up means all three answer: the GCS (drivers, workers), the dashboard (jobs, the browser) and the head's
    # dashboard agent, which every submitted job goes through (a submission before it starts is refused).
    ports = (GCS_PORT, DASHBOARD_PORT, DASHBOARD_AGENT_PORT)
    ready = lambda: not node.alive() or all(gcs_reachable(ip, port) for port in ports)  # noqa: E731
    if not wait_for(ready, 90) or not node.alive():
        node.stop()
        raise UsageError(f"the Ray head did not start; see {spec.temp_dir}/ray-start.log")
    cluster = LocalCluster(
        pid=node.process.pid,
        address=f"{ip}:{GCS_PORT}",
        dashboard_url=f"http://{ip}:{DASHBOARD_PORT}",
        token_path=str(token),
        temp_dir=str(spec.temp_dir),
    )
    state_file(state_dir).write_text(json.dumps(asdict(cluster), indent=2))
    return cluster


def down(state_dir: Path) -> LocalCluster:
    path = state_file(state_dir)
    if not path.exists():
        raise UsageError(f"no cluster recorded in {state_dir}; nothing to stop")
    cluster = LocalCluster(**json.loads(path.read_text()))
    stop_node_process(cluster.pid)
    path.unlink()
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)  # its sockets, logs and every process's temp files
    return cluster
