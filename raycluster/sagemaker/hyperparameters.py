"""Hyperparameters <-> command-line flags.

A job's hyperparameters hold three kinds of keys: ``entry.*`` (how the entry point runs the cluster),
``cluster.*`` (``raycluster train``'s own settings) and everything else (LeRobot flags, e.g. ``policy.type``,
``steps``). SageMaker's driver JSON-decodes every value it can, so ``"7"`` arrives as 7 and ``"null"`` as
None: turning them back into flags re-encodes them as LeRobot's parser expects.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from raycluster.errors import UsageError

ENTRY_PREFIX = "entry."


@dataclass(frozen=True)
class EntrySettings:
    job: str = "jobs/train_lerobot.py"
    """The Ray job script to run on the head, relative to the source directory; ``none`` runs no job
    (with ``keep_alive_s``: a cluster for your own jobs)."""
    keep_alive_s: float = 0.0
    """Interactive mode: after the job (or with no job) the cluster stays up this long, for your own Ray
    jobs and the dashboard; ``jobs/end_cluster.py`` ends it earlier."""
    join_timeout_s: float = 300.0
    """Head: how long every host's Ray node may take to join."""
    head_wait_s: float = 300.0
    """Worker: how long to keep trying to reach the head."""
    lost_after_s: float = 15.0
    """How long a vanished head (seen from a worker) or a dead node (seen from the head) is tolerated."""
    stop_timeout_s: float = 60.0
    """On SIGTERM: how long the job gets to stop before its nodes are stopped regardless (SageMaker
    sends SIGKILL 120 s after SIGTERM)."""
    preflight: bool = False
    """Run jobs/nccl_probe.py (all-reduce across every worker, EFA or socket fallback) before the job."""
    head_trains: bool = True
    """False: the head's node offers no CPUs/GPUs to training, so every training worker (rank 0 too) runs
    on the other hosts; the head only coordinates (the driver and the checkpoint keeper need none)."""
    head_group: str | None = None
    """Instance group whose first host is the head (heterogeneous clusters); read by the topology."""


def encode_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool) or str(value).lower() in ("true", "false"):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    raise ValueError(value)


def split_hyperparameters(hps: dict[str, Any]) -> tuple[EntrySettings, list[str]]:
    """``entry.*`` keys become EntrySettings; all others become ``--key=value`` flags, in order."""
    fields = {f.name: f for f in dataclasses.fields(EntrySettings)}
    settings: dict[str, Any] = {}
    flags = []
    for key, value in hps.items():
        if not key.startswith(ENTRY_PREFIX):
            flags.append(f"--{key}={encode_value(value)}")
            continue
        name = key.removeprefix(ENTRY_PREFIX)
        if name not in fields:
            raise UsageError(f"unknown hyperparameter {key}; known: {', '.join(ENTRY_PREFIX + n for n in fields)}")
        kind = {"float": float, "bool": _boolean}.get(fields[name].type, str)
        try:
            settings[name] = None if value is None else kind(value)
        except (TypeError, ValueError):
            raise UsageError(f"hyperparameter {key}={value!r} must be a {fields[name].type}") from None
    return EntrySettings(**settings), flags


def decode_like_sagemaker(hps: dict[str, str]) -> dict[str, Any]:
    """What SageMaker's v3 driver makes of a CreateTrainingJob request's string hyperparameters (its
    SM_HPS): every value that parses as JSON is decoded."""
    decoded = {}
    for key, value in hps.items():
        try:
            decoded[key] = json.loads(value)
        except (TypeError, json.JSONDecodeError):
            decoded[key] = value
    return decoded


def to_hyperparameters(flags: list[str]) -> dict[str, str]:
    """The inverse, for a launcher: ``--key=value`` flags as SageMaker hyperparameters (strings)."""
    hps = {}
    for flag in flags:
        if not flag.startswith("--") or "=" not in flag:
            raise UsageError(f"{flag!r}: pass flags as --key=value to become hyperparameters")
        key, value = flag[2:].split("=", 1)
        hps[key] = value
    return hps
