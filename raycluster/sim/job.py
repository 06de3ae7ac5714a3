"""Run a training job on simulated hosts as SageMaker would: each host gets the channels and config files
the service lays out (``opt_ml``), and runs the request's container command (the SDK's own ``sm_train.sh``) as PID 1."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.faults import forwarded
from raycluster.layout import SCRATCH
from raycluster.sagemaker.stop_budget import SIGKILL_AFTER_S
from raycluster.sim.aws_relay import AwsRelay
from raycluster.sim.network import SimNetwork
from raycluster.sim.opt_ml import host_names, lay_out_opt_ml
from raycluster.sim.spec import SimSpec

log = logging.getLogger(__name__)

OPT_ML = Path("/opt/ml")
KILL_AFTER_S = int(SIGKILL_AFTER_S)
PASSED_ENV = ("PATH", "LANG", "HF_HUB_OFFLINE", "WANDB_MODE")
ROLE_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def container_env(spec: SimSpec, host: str, aws_url: str | None) -> dict[str, str]:
    """What the platform and the image give the container; every SM_* variable comes from SageMaker's
    own driver inside it."""
    request = spec.staged.request
    # Fault injection for tests reaches every host too, through the one seam.
    env = {name: value for name, value in os.environ.items() if name in PASSED_ENV} | forwarded(os.environ)
    if aws_url:
        env.update({name: value for name, value in os.environ.items() if name in ROLE_CREDENTIALS})
        env["AWS_ENDPOINT_URL"] = aws_url
    # The image's `python` is the one with Ray and LeRobot: this machine's.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env.update(
        {
            "HOME": str(spec.workdir / host / "home"),
            "TMPDIR": str(SCRATCH / "tmp"),
            "PYTHONUNBUFFERED": "1",
            # The image is this machine's virtualenv, already holding the requirements; there is no index to reach.
            "PIP_NO_INDEX": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "TRAINING_JOB_ARN": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{request['TrainingJobName']}",
            **(request.get("Environment") or {}),
        }
    )
    return env


def container_command(spec: SimSpec) -> list[str]:
    algorithm = spec.staged.request["AlgorithmSpecification"]
    return [*(algorithm.get("ContainerEntrypoint") or []), *(algorithm.get("ContainerArguments") or [])]


class SimHost:
    def __init__(self, spec: SimSpec, network: SimNetwork, host: str, echo, aws_url: str | None):
        self.host = host
        self.dir = spec.workdir / host
        base = lay_out_opt_ml(spec, host)
        scratch = self.dir / "scratch"
        (scratch / "tmp").mkdir(parents=True, exist_ok=True)
        (self.dir / "home").mkdir(parents=True, exist_ok=True)
        # Inside the host: its own /opt/ml and node-local scratch (Ray's temp dir, LeRobot's output dir), a
        # hostname that is not algo-N (as under SageMaker's v3 driver), and the entry point as PID 1 of its
        # own PID namespace. /tmp itself stays shared: the source tree may live there.
        script = (
            f"mount --bind {base} {OPT_ML} && mount --bind {scratch} {SCRATCH} && hostname ip-{host} && "
            f"cd / && exec {shlex.join(container_command(spec))}"
        )
        self.process = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                network.namespace(host),
                *("unshare", "--pid", "--fork", "--mount-proc", "--uts", "--kill-child=SIGKILL"),
                *("sh", "-c", script),
            ],
            env=container_env(spec, host, aws_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
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
    made_opt_ml = not OPT_ML.exists()
    OPT_ML.mkdir(parents=True, exist_ok=True)  # the mount points each host binds its own directories onto
    SCRATCH.mkdir(parents=True, exist_ok=True)
    network = SimNetwork(host_names(spec.hosts))
    hosts: list[SimHost] = []
    relay = AwsRelay(network, spec.aws_endpoint) if spec.aws_endpoint else None
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
        aws_url = relay.start() if relay else None
        hosts = [SimHost(spec, network, name, echo, aws_url) for name in network.hosts]
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
        if relay:
            relay.stop()
        network.destroy()
        if made_opt_ml:
            OPT_ML.rmdir()
        for s, handler in previous.items():
            signal.signal(s, handler)
    (spec.workdir / "sim_result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
