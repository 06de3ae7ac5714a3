"""The job's topology from SageMaker's environment and ``<base>/input/config/*.json``, checked strictly.

Every malformed input becomes a UsageError naming the variable or file and the fix, before any Ray
process starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raycluster.errors import UsageError
from raycluster.layout import BASE_ENV, sagemaker_base
from raycluster.sagemaker.hyperparameters import flag_name, value_text

# SageMaker's own channels, not data.
NON_DATA_CHANNELS = {"code", "sm_drivers"}


def host_order(host: str) -> tuple[str, int, str]:
    """algo-2 before algo-10 (SM_HOSTS itself is sorted as text)."""
    match = re.fullmatch(r"(.*?)(\d+)", host)
    return (match.group(1), int(match.group(2)), host) if match else (host, -1, host)


@dataclass(frozen=True)
class Topology:
    base: Path
    hosts: tuple[str, ...]
    """Numeric order; ``hosts[0]`` is not necessarily the head when a head instance group is named."""
    current_host: str
    head_host: str
    num_gpus: int
    num_cpus: int
    hyperparameters: dict[str, Any]
    channels: dict[str, Path]
    network_interface: str
    instance_type: str | None
    instance_groups: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def current_group(self) -> str | None:
        """The instance group this host belongs to (every SageMaker job has one, ``homogeneousCluster`` by default)."""
        return next((name for name, hosts in self.instance_groups.items() if self.current_host in hosts), None)

    @property
    def is_head(self) -> bool:
        return self.current_host == self.head_host

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def checkpoint_dir(self) -> Path:
        return self.base / "checkpoints"


def _json(text: str, what: str, fix: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc.msg} at char {exc.pos}); {fix}") from None


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if value is None or not value.strip():
        raise UsageError(
            f"{name} is not set; SageMaker sets it on every host (outside SageMaker, use `raycluster sim`)"
        )
    return value


def _count(env: Mapping[str, str], name: str, minimum: int) -> int:
    text = _required(env, name)
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name}={text!r} is not an integer") from None
    if value < minimum:
        raise UsageError(f"{name}={value} must be >= {minimum}")
    return value


def _hosts(env: Mapping[str, str]) -> tuple[str, ...]:
    hosts = _json(_required(env, "SM_HOSTS"), "SM_HOSTS", 'expected a JSON list such as ["algo-1","algo-2"]')
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise UsageError(f"SM_HOSTS must be a JSON list of host names, got {hosts!r}")
    if not hosts:
        raise UsageError("SM_HOSTS is empty; a job has at least one host")
    for host in hosts:
        if hosts.count(host) > 1:
            raise UsageError(f"SM_HOSTS lists {host} more than once: {hosts}")
    return tuple(sorted(hosts, key=host_order))


def _config_file(base: Path, name: str, required: bool) -> dict | None:
    path = base / "input" / "config" / name
    if not path.is_file():
        if required:
            raise UsageError(
                f"{path} is missing; SageMaker writes it on every host (set {BASE_ENV} to a fake /opt/ml outside SageMaker)"
            )
        return None
    data = _json(path.read_text(), str(path), "SageMaker writes it; a hand-made one must be a JSON object")
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data


def _channels(env: Mapping[str, str]) -> dict[str, Path]:
    channels = {}
    for name, value in env.items():
        if not name.startswith("SM_CHANNEL_") or name == "SM_CHANNELS":
            continue
        channel = name.removeprefix("SM_CHANNEL_").lower()
        if channel in NON_DATA_CHANNELS:
            continue
        path = Path(value)
        if not path.exists():
            raise UsageError(f"{name}={value} does not exist; the channel's data was not mounted")
        channels[channel] = path
    return channels


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) and name for name in value)


def _groups(listed: Any, hosts: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """resourceconfig.json's instance groups: name -> its hosts, each checked (a file is input like any other),
    every one among ``hosts`` (the job's: the head and Ray's resources follow a group's hosts)."""
    if not isinstance(listed, list):
        raise UsageError(f"resourceconfig.json instance_groups must be a JSON list, got {listed!r}")
    groups = {}
    for group in listed:
        if not isinstance(group, dict) or "instance_group_name" not in group:
            continue
        name, members = group["instance_group_name"], group.get("hosts", [])
        if not isinstance(name, str) or not _names(members):
            raise UsageError(
                f"resourceconfig.json instance group {name!r}: expected a name and a JSON list of host names, "
                f"got hosts {members!r}"
            )
        if strangers := [host for host in members if host not in hosts]:
            raise UsageError(
                f"resourceconfig.json instance group {name!r} lists {strangers}, which are not in SM_HOSTS {list(hosts)}"
            )
        groups[name] = tuple(sorted(members, key=host_order))
    return groups


def read_topology(env: Mapping[str, str]) -> Topology:
    base = sagemaker_base(env)
    hosts = _hosts(env)
    current = _required(env, "SM_CURRENT_HOST")
    if current not in hosts:
        raise UsageError(f"SM_CURRENT_HOST={current} is not in SM_HOSTS {list(hosts)}")
    num_gpus = _count(env, "SM_NUM_GPUS", 0)
    num_cpus = _count(env, "SM_NUM_CPUS", 1)
    decoded = _json(env.get("SM_HPS", "{}"), "SM_HPS", "expected a JSON object of hyperparameters")
    if not isinstance(decoded, dict):
        raise UsageError(f"SM_HPS must be a JSON object, got {type(decoded).__name__}")

    resources = _config_file(base, "resourceconfig.json", required=True)
    # The values as sent, not as SM_HPS holds them (JSON-decoded: "[32, 64]" would come back "[32,64]").
    hps = _config_file(base, "hyperparameters.json", required=True)
    _config_file(base, "inputdataconfig.json", required=False)
    if not _names(resources.get("hosts", [])):
        raise UsageError(f"resourceconfig.json hosts must be a JSON list of host names, got {resources.get('hosts')!r}")
    if sorted(resources.get("hosts", []), key=host_order) != list(hosts):
        raise UsageError(f"resourceconfig.json hosts {resources.get('hosts')} differ from SM_HOSTS {list(hosts)}")
    if resources.get("current_host") != current:
        raise UsageError(
            f"resourceconfig.json current_host {resources.get('current_host')!r} differs from SM_CURRENT_HOST={current}"
        )
    groups = _groups(resources.get("instance_groups") or [], hosts)
    head_group = next((value_text(v) for k, v in hps.items() if flag_name(k) == "entry.head_group"), None)
    if head_group not in (None, "", "null"):
        if head_group not in groups or not groups[head_group]:
            raise UsageError(
                f"hyperparameter entry.head_group={head_group!r} names no instance group with hosts; groups: {sorted(groups)}"
            )
        head = groups[head_group][0]
    else:
        head = hosts[0]
    return Topology(
        base=base,
        hosts=hosts,
        current_host=current,
        head_host=head,
        num_gpus=num_gpus,
        num_cpus=num_cpus,
        hyperparameters=hps,
        channels=_channels(env),
        network_interface=env.get("SM_NETWORK_INTERFACE_NAME") or resources.get("network_interface_name") or "eth0",
        instance_type=resources.get("current_instance_type"),
        instance_groups=groups,
    )
