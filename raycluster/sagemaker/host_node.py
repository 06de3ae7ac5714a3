"""This host's Ray node: its credentials, its environment (collectives over the right interface, EFA on
GPUs) and its spec."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from raycluster.bootstrap import NodeSpec, resolve
from raycluster.errors import UsageError
from raycluster.layout import AUTH_TOKEN_ENV, AUTH_TOKEN_FILE, SCRATCH, SOURCE_DIR
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.network_env import collective_env, efa_available, gpu_network_env
from raycluster.sagemaker.topology import Topology

log = logging.getLogger(__name__)


def auth_env(settings: EntrySettings) -> dict[str, str]:
    """Ray token authentication with the job's one shared token. `raycluster launch` ships it with the
    code (never in hyperparameters or environment, which DescribeTrainingJob shows); the entry point
    only names the file, so the token itself is never logged. Without one the cluster does not start:
    its Jobs API would run anyone's code in the VPC as this job's role."""
    path = Path(os.environ.get(AUTH_TOKEN_ENV) or SOURCE_DIR / AUTH_TOKEN_FILE)
    if path.is_file():
        if not path.read_text().strip():
            raise UsageError(f"the Ray auth token at {path} is empty: ship the job's token with its code")
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    if not settings.insecure:
        raise UsageError(
            f"no Ray auth token at {path}: ship one with the code (raycluster launch does; "
            f"any 64 hex characters in {AUTH_TOKEN_FILE}) or, to run open to the whole VPC, "
            "set the hyperparameter entry__insecure=true"
        )
    log.warning(
        "entry.insecure=true and no Ray auth token: the cluster runs WITHOUT authentication; anyone who "
        "reaches this job's network can submit code that runs as its IAM role"
    )
    return {}


def node_env(topology: Topology, run: Callable[..., subprocess.CompletedProcess]) -> dict[str, str]:
    """``run``: how this process runs a command (the EFA probe), ``OrphanReaper.run``."""
    # The credentials (auth_env) are already in this process's environment, which the nodes inherit.
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_DIR), os.environ.get("PYTHONPATH")]))}
    env.update(collective_env(topology.network_interface, os.environ))
    env.update(
        gpu_network_env(
            topology.num_gpus,
            topology.network_interface,
            topology.instance_type,
            efa_available(run) if topology.num_gpus else False,
            os.environ,
        )
    )
    return env


def node_spec(
    topology: Topology, head_address: str | None, run: Callable[..., subprocess.CompletedProcess], trains: bool = True
) -> NodeSpec:
    return NodeSpec(
        ip=resolve(topology.current_host),
        num_cpus=topology.num_cpus if trains else 0,
        num_gpus=topology.num_gpus if trains else 0,
        temp_dir=SCRATCH / "ray",
        head_address=head_address,
        env=node_env(topology, run),
        resources=group_resources(topology),
    )


def group_resources(topology: Topology) -> dict[str, float]:
    """``group:<name>``, one per CPU of this host: what ``--cluster.eval_resources='{"group:<name>": 1}'`` asks
    for to run evaluations on that instance group's hosts only (Ray names its own placement-group resources
    with ``_group_``: SageMaker's group names, letters, digits and '-', never collide with them)."""
    group = topology.current_group
    return {f"group:{group}": float(topology.num_cpus)} if group else {}
