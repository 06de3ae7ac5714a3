"""Run the entry point on every simulated host exactly as SageMaker's container would."""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.sagemaker.entrypoint import SCRATCH
from raycluster.sim.network import SimNetwork

log = logging.getLogger(__name__)

SOURCE_DIR = Path(__file__).resolve().parents[2]
OPT_ML = Path("/opt/ml")
# SageMaker sends SIGKILL this long after SIGTERM.
KILL_AFTER_S = 120
PASSED_ENV = ("PATH", "LANG", "HF_HUB_OFFLINE", "WANDB_MODE")


@dataclass(frozen=True)
class SimSpec:
    hosts: int
    workdir: Path
    hyperparameters: dict
    channels: dict[str, Path]
    cpus_per_host: int = 1
    checkpoints: Path | None = None
    """Copied into every host's /opt/ml/checkpoints first, as SageMaker restores them for a restarted job."""
    instance_type: str = "ml.c5.xlarge"


def host_names(n: int) -> list[str]:
    return [f"algo-{k}" for k in range(1, n + 1)]


def lay_out_opt_ml(spec: SimSpec, host: str) -> Path:
    """``<workdir>/<host>/opt/ml`` as SageMaker lays it out, with SageMaker's config files."""
    hosts = host_names(spec.hosts)
    base = spec.workdir / host / "opt" / "ml"
    for sub in ("input/config", "input/data", "checkpoints", "model", "output/data"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    config = base / "input" / "config"
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": host, "current_instance_type": spec.instance_type, "current_group_name": "homogeneousCluster",
        "hosts": hosts, "network_interface_name": "eth0",
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": spec.instance_type, "hosts": hosts}],
    }))
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) if not isinstance(v, str) else v
                                                              for k, v in spec.hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps({name: {"TrainingInputMode": "File"} for name in spec.channels}))
    if spec.checkpoints is not None and not any((base / "checkpoints").iterdir()):
        shutil.copytree(spec.checkpoints, base / "checkpoints", dirs_exist_ok=True, symlinks=True)
    # The job's shared Ray auth token, where every simulated host finds it (`raycluster launch` ships it
    # with the code instead).
    token = config / "raycluster_auth_token"
    token.write_text((spec.workdir / "auth_token").read_text())
    token.chmod(0o600)
    for name, source in spec.channels.items():
        target = base / "input" / "data" / name
        if not target.exists():
            shutil.copytree(source, target, symlinks=True)
    return base


def host_env(spec: SimSpec, host: str) -> dict[str, str]:
    hosts = host_names(spec.hosts)
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    # The container's `python` is the one with Ray and LeRobot: a submitted job's `python` must be too.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env.update({
        "HOME": str(spec.workdir / host / "home"), "TMPDIR": str(SCRATCH / "tmp"),
        "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SOURCE_DIR),
        "SM_HOSTS": json.dumps(sorted(hosts)), "SM_CURRENT_HOST": host, "SM_CURRENT_HOST_RANK": str(hosts.index(host)),
        "SM_HOST_COUNT": str(len(hosts)), "SM_NUM_GPUS": "0", "SM_NUM_CPUS": str(spec.cpus_per_host),
        "SM_HPS": json.dumps(spec.hyperparameters), "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_CHANNELS": json.dumps(sorted(spec.channels)), "SM_MODEL_DIR": "/opt/ml/model",
        "SM_OUTPUT_DIR": "/opt/ml/output", "SM_OUTPUT_FAILURE": "/opt/ml/output/failure",
        "RAYCLUSTER_AUTH_TOKEN_FILE": "/opt/ml/input/config/raycluster_auth_token",
    })
    for key, value in spec.hyperparameters.items():
        env[f"SM_HP_{key.upper().replace('-', '_').replace('.', '_')}"] = json.dumps(value)
    for name in spec.channels:
        env[f"SM_CHANNEL_{name.upper()}"] = f"/opt/ml/input/data/{name}"
    return env


class SimHost:
    def __init__(self, spec: SimSpec, network: SimNetwork, host: str, echo):
        self.host = host
        self.dir = spec.workdir / host
        base = lay_out_opt_ml(spec, host)
        scratch = self.dir / "scratch"
        (scratch / "tmp").mkdir(parents=True, exist_ok=True)
        (self.dir / "home").mkdir(parents=True, exist_ok=True)
        # Inside the host: its own /opt/ml and node-local scratch (Ray's temp dir, LeRobot's output dir), a
        # hostname that is not algo-N (as under SageMaker's v3 driver), and the entry point as PID 1 of its
        # own PID namespace. /tmp itself stays shared: the source tree may live there.
        script = (f"mount --bind {base} {OPT_ML} && mount --bind {scratch} {SCRATCH} && hostname ip-{host} && "
                  f"cd {SOURCE_DIR} && exec {sys.executable} -u -m entry")
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", network.namespace(host), "unshare", "--pid", "--fork", "--mount-proc",
             "--uts", "--kill-child=SIGKILL", "sh", "-c", script],
            env=host_env(spec, host), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )
        (self.dir / "host.pid").write_text(str(self.process.pid))
        (self.dir / "netns").write_text(network.namespace(host))
        self._pump = threading.Thread(target=self._relay, args=(echo,), daemon=True)
        self._pump.start()

    def _relay(self, echo) -> None:
        with (self.dir / "log.txt").open("w") as log_file:
            for line in self.process.stdout:
                log_file.write(line)
                log_file.flush()
                echo(f"[{self.host}] {line.rstrip()}")

    def entry_pid(self) -> int | None:
        """The entry point's PID as this machine sees it (PID 1 inside the host)."""
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def terminate(self) -> None:
        pid = self.entry_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)

    def kill(self) -> None:
        try:
            self.process.kill()  # --kill-child takes the whole PID namespace with it
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None = None) -> int:
        code = self.process.wait(timeout)
        self._pump.join(5)
        return code

    def failure(self) -> str | None:
        path = self.dir / "opt" / "ml" / "output" / "failure"
        return path.read_text().strip() if path.exists() else None


def run_sim(spec: SimSpec, echo=print) -> dict:
    if os.geteuid() != 0:
        raise UsageError("raycluster sim needs root (network and PID namespaces)")
    if spec.hosts < 1:
        raise UsageError(f"--hosts must be >= 1, got {spec.hosts}")
    spec.workdir.mkdir(parents=True, exist_ok=True)
    (spec.workdir / "auth_token").write_text(secrets.token_hex(32))
    made_opt_ml = not OPT_ML.exists()
    OPT_ML.mkdir(parents=True, exist_ok=True)  # the mount points each host binds its own directories onto
    SCRATCH.mkdir(parents=True, exist_ok=True)
    network = SimNetwork(host_names(spec.hosts))
    hosts: list[SimHost] = []
    stopping = threading.Event()

    def on_signal(signum, _frame):
        if not stopping.is_set():
            echo(f"[sim] signal {signum}: SIGTERM to every host, SIGKILL after {KILL_AFTER_S}s (as SageMaker does)")
            stopping.set()
            for h in hosts:
                h.terminate()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        network.create()
        hosts = [SimHost(spec, network, name, echo) for name in network.hosts]
        deadline = None
        while any(h.process.poll() is None for h in hosts):
            if stopping.is_set():
                deadline = deadline or time.monotonic() + KILL_AFTER_S
                if time.monotonic() > deadline:
                    for h in hosts:
                        h.kill()
            time.sleep(0.5)
        result = {"hosts": {h.host: {"exit_code": h.wait(), "failure": h.failure()} for h in hosts}}
    finally:
        for h in hosts:
            h.kill()
            h.wait()
        network.destroy()
        if made_opt_ml:
            OPT_ML.rmdir()
        for s, handler in previous.items():
            signal.signal(s, handler)
    (spec.workdir / "sim_result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
