"""``/opt/ml`` of a simulated host as SageMaker lays it out before it starts the container: the config files
the service writes and every channel's files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.sim.spec import SimSpec


def host_names(n: int) -> list[str]:
    return [f"algo-{k}" for k in range(1, n + 1)]


def input_channels(spec: SimSpec) -> dict[str, dict]:
    """inputdataconfig.json as the service writes it: every channel of the request, and the local ones."""
    request_channels = {c["ChannelName"]: c for c in spec.staged.request.get("InputDataConfig") or []}
    missing = set(request_channels) - {"code", "sm_drivers"} - set(spec.channels)
    if missing:
        raise UsageError(f"the request has channel(s) {', '.join(sorted(missing))}: give each as --channel NAME=PATH")
    names = list(request_channels) + [name for name in spec.channels if name not in request_channels]
    return {
        name: {
            "TrainingInputMode": request_channels.get(name, {}).get("InputMode", "File"),
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
        for name in names
    }


def instance_groups(request: dict, hosts: list[str]) -> list[dict]:
    """resourceconfig.json's ``instance_groups``: the request's (SageMaker numbers the hosts across them, in
    order), or the one group SageMaker names ``homogeneousCluster`` for a request without any."""
    resource = request["ResourceConfig"]
    groups = resource.get("InstanceGroups") or [
        {
            "InstanceGroupName": "homogeneousCluster",
            "InstanceType": resource["InstanceType"],
            "InstanceCount": len(hosts),
        }
    ]
    laid_out, first = [], 0
    for group in groups:
        members = hosts[first : first + group["InstanceCount"]]
        laid_out.append(
            {
                "instance_group_name": group["InstanceGroupName"],
                "instance_type": group["InstanceType"],
                "hosts": members,
            }
        )
        first += group["InstanceCount"]
    if first != len(hosts):
        raise UsageError(f"the request's instance groups hold {first} hosts, not {len(hosts)}: drop --hosts")
    return laid_out


def lay_out_opt_ml(spec: SimSpec, host: str) -> Path:
    """``<workdir>/<host>/opt/ml`` as SageMaker lays it out before it starts the container: the config
    files the service writes and every channel's files."""
    hosts = host_names(spec.hosts)
    request = spec.staged.request
    groups = instance_groups(request, hosts)
    own = next(group for group in groups if host in group["hosts"])
    base = spec.workdir / host / "opt" / "ml"
    for sub in ("input/config", "input/data", "checkpoints", "model", "output/data"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    config = base / "input" / "config"
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": host,
                "current_instance_type": own["instance_type"],
                "current_group_name": own["instance_group_name"],
                "hosts": hosts,
                "network_interface_name": "eth0",
                "instance_groups": groups,
            }
        )
    )
    (config / "hyperparameters.json").write_text(json.dumps(request.get("HyperParameters") or {}))
    (config / "inputdataconfig.json").write_text(json.dumps(input_channels(spec)))
    if spec.checkpoints is not None and not any((base / "checkpoints").iterdir()):
        shutil.copytree(spec.checkpoints, base / "checkpoints", dirs_exist_ok=True, symlinks=True)
    sources = {"code": spec.staged.code, "sm_drivers": spec.staged.drivers, **spec.channels}
    for name, source in sources.items():
        target = base / "input" / "data" / name
        if not target.exists():
            shutil.copytree(source, target, symlinks=True)
    return base
