"""``/opt/ml`` of a simulated host as SageMaker lays it out before it starts the container: the config files
the service writes and every channel's files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from raycluster.errors import UsageError

if TYPE_CHECKING:
    from raycluster.sim.job import SimSpec


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


def lay_out_opt_ml(spec: SimSpec, host: str) -> Path:
    """``<workdir>/<host>/opt/ml`` as SageMaker lays it out before it starts the container: the config
    files the service writes and every channel's files."""
    hosts = host_names(spec.hosts)
    request = spec.staged.request
    instance_type = request["ResourceConfig"]["InstanceType"]
    base = spec.workdir / host / "opt" / "ml"
    for sub in ("input/config", "input/data", "checkpoints", "model", "output/data"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    config = base / "input" / "config"
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": host,
                "current_instance_type": instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": hosts,
                "network_interface_name": "eth0",
                "instance_groups": [
                    {"instance_group_name": "homogeneousCluster", "instance_type": instance_type, "hosts": hosts}
                ],
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
