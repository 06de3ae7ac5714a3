"""NCCL/EFA environment for GPU hosts, set before Ray starts so every worker inherits it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping

# Instance families whose EFA supports GPUDirect RDMA.
RDMA_FAMILIES = ("ml.p4d.", "ml.p4de.", "ml.p5.", "ml.p5e.", "ml.p5en.", "ml.p6-b200.", "ml.p6e-gb200.")


def efa_available(run: Callable[..., subprocess.CompletedProcess]) -> bool:
    """``fi_info -p efa`` succeeds only where an EFA device and libfabric's provider are present. ``run``: how
    this process runs a command (``OrphanReaper.run``, whose exit status PID 1's reaper never takes)."""
    if shutil.which("fi_info") is None:
        return False
    try:
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        return run(["fi_info", "-p", "efa"], 20, **quiet).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def collective_env(network_interface: str, current: Mapping[str, str]) -> dict[str, str]:
    """Gloo (CPU training) picks its interface from gethostname(), which under SageMaker's v3 driver is
    not algo-N and may resolve to loopback: name the job's interface instead."""
    return {} if "GLOO_SOCKET_IFNAME" in current else {"GLOO_SOCKET_IFNAME": network_interface}


def gpu_network_env(
    num_gpus: int, network_interface: str, instance_type: str | None, efa: bool, current: Mapping[str, str]
) -> dict[str, str]:
    """The variables to add; any the user already set keeps the user's value."""
    if num_gpus == 0:
        return {}
    wanted = {"RDMAV_FORK_SAFE": "1", "NCCL_SOCKET_IFNAME": network_interface}
    if efa:
        wanted["FI_PROVIDER"] = "efa"
        if instance_type and instance_type.startswith(RDMA_FAMILIES):
            wanted["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return {name: value for name, value in wanted.items() if name not in current}
