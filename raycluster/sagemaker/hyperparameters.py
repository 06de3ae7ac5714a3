"""Hyperparameters <-> command-line flags, in a form that survives SageMaker's own container driver.

SageMaker's v3 driver (``sm_train.sh`` + ``scripts/environment.py`` from the SDK's ``container_drivers``)
writes one ``export SM_HP_<KEY>='<value>'`` line per hyperparameter, KEY only upper-cased with ``-`` turned
into ``_``, and sources that file under ``set -e``. So a key must be a shell identifier after that
transform, and no value (nor the JSON of all of them, ``SM_HPS``) may hold a ``'``.

The encoding: a flag ``--group.field=value`` travels as the key ``group__field`` (each ``.`` becomes
``__``) with the value's text unchanged, e.g. ``policy__type=act``, ``entry__keep_alive_s=600``,
``policy__down_dims=[32,64]``. The entry point reads the values as text from
``/opt/ml/input/config/hyperparameters.json`` (SM_HPS holds them JSON-decoded, which would turn
``[32, 64]`` into ``[32,64]`` and ``1e3`` into ``1000.0``), and turns ``__`` back into ``.``. Dotted keys
are accepted too, where they arrive intact (the older sagemaker-training toolkit carries them).

A job's hyperparameters hold three kinds of keys: ``entry.*`` (how the entry point runs the cluster),
``cluster.*`` (``raycluster train``'s own settings) and everything else (LeRobot flags).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raycluster.errors import UsageError

ENTRY_PREFIX = "entry."
NO_JOB = "none"
DOT = "__"
# What a key may hold after encoding: SM_HP_<KEY> must be a shell identifier once `-` became `_`.
KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# CreateTrainingJob's limits on one hyperparameter.
MAX_KEY, MAX_VALUE = 256, 2500
# Older framework estimators add their own (sagemaker_program, sagemaker_submit_directory, ...).
SDK_KEY_PREFIX = "sagemaker_"


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
    stop_timeout_s: float = 45.0
    """On SIGTERM: how long the job gets to save its current step and stop before its nodes are stopped
    regardless (SageMaker sends SIGKILL 120 s after SIGTERM; at most 60)."""
    preflight: bool = False
    """Run jobs/nccl_probe.py (all-reduce across every worker, EFA or socket fallback) before the job."""
    head_trains: bool = True
    """False: the head's node offers no CPUs/GPUs to training, so every training worker (rank 0 too) runs
    on the other hosts; the head only coordinates (the driver and the checkpoint keeper need none)."""
    head_group: str | None = None
    """Instance group whose first host is the head (heterogeneous clusters); read by the topology."""
    insecure: bool = False
    """True: start even without a Ray auth token in the code (the dashboard and Jobs API then answer
    anyone who reaches the job's network). Off by default: no token, no cluster."""


# SageMaker sends SIGKILL this long after SIGTERM: a stop must fit inside it.
SIGKILL_AFTER_S = 120.0
MAX_STOP_TIMEOUT_S = 60.0
POSITIVE = ("join_timeout_s", "head_wait_s", "lost_after_s", "stop_timeout_s")


def check_settings(settings: EntrySettings) -> EntrySettings:
    """Ranges, in one place: a setting out of range stops the job at once, naming the hyperparameter."""
    for name in (*POSITIVE, "keep_alive_s"):
        value = getattr(settings, name)
        if value is None or not math.isfinite(value) or value < 0 or (value == 0 and name in POSITIVE):
            bound = "> 0" if name in POSITIVE else ">= 0"
            raise UsageError(f"hyperparameter entry__{name}={value} must be a finite number {bound} (seconds)")
    if settings.stop_timeout_s > MAX_STOP_TIMEOUT_S:
        raise UsageError(
            f"hyperparameter entry__stop_timeout_s={settings.stop_timeout_s:g} must be at most "
            f"{MAX_STOP_TIMEOUT_S:g}: SageMaker kills every host {SIGKILL_AFTER_S:g}s after SIGTERM, "
            "and the job's report and the nodes' own stop need the rest"
        )
    job = settings.job
    if not job or (job != NO_JOB and (Path(job).is_absolute() or ".." in Path(job).parts or not job.endswith(".py"))):
        raise UsageError(
            f"hyperparameter entry__job={job!r} must be a .py script inside the source directory "
            "(e.g. jobs/train_lerobot.py), or none"
        )
    return settings


def encode_value(value: Any) -> str:
    """A value as flag text: JSON for what JSON decoding made (None -> null, True -> true, lists)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict, bool)) or value is None:
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def flag_name(key: str) -> str:
    """A hyperparameter key as the flag's name: ``policy__type`` -> ``policy.type``."""
    return key.replace(DOT, ".")


def value_text(value: Any) -> str:
    # Older framework estimators JSON-encode every value, strings too ("\"act\""): unwrap those once.
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        return decoded if isinstance(decoded, str) else value
    return encode_value(value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool) or str(value).lower() in ("true", "false"):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    raise ValueError(value)


def split_hyperparameters(hps: dict[str, Any]) -> tuple[EntrySettings, list[str]]:
    """``entry.*`` keys become EntrySettings; all others become ``--name=value`` flags, in order."""
    fields = {f.name: f for f in dataclasses.fields(EntrySettings)}
    settings: dict[str, Any] = {}
    flags = []
    for key, value in hps.items():
        if key.startswith(SDK_KEY_PREFIX):
            continue
        name, text = flag_name(key), value_text(value)
        if not name.startswith(ENTRY_PREFIX):
            flags.append(f"--{name}={text}")
            continue
        field = name.removeprefix(ENTRY_PREFIX)
        if field not in fields:
            raise UsageError(f"unknown hyperparameter {key}; known: {', '.join('entry__' + n for n in fields)}")
        kind = {"float": float, "bool": _boolean}.get(fields[field].type, str)
        try:
            settings[field] = None if text in ("null", "") and fields[field].type != "bool" else kind(text)
        except (TypeError, ValueError):
            raise UsageError(f"hyperparameter {key}={text!r} must be a {fields[field].type}") from None
    return check_settings(EntrySettings(**settings)), flags


def to_hyperparameters(flags: list[str]) -> dict[str, str]:
    """The inverse, for a launcher: ``--group.field=value`` flags as hyperparameters SageMaker's driver
    carries (``group__field``: ``value``). Refuses, naming the flag, what the driver or the API cannot carry."""
    hps: dict[str, str] = {}
    for flag in flags:
        if not flag.startswith("--") or "=" not in flag:
            raise UsageError(f"{flag!r}: pass flags as --name=value to become hyperparameters")
        name, value = flag[2:].split("=", 1)
        if DOT in name:
            raise UsageError(
                f"{flag!r}: a flag name with '{DOT}' cannot travel as a hyperparameter ('.' is sent as '{DOT}')"
            )
        key = name.replace(".", DOT)
        if not KEY.match(key):
            raise UsageError(
                f"{flag!r}: a flag name may hold only letters, digits, '_', '-' and '.' to survive "
                "SageMaker's driver (its hyperparameters become shell variables)"
            )
        if key in hps:
            raise UsageError(f"{flag!r}: --{name} is given twice; keep one (a hyperparameter is sent once)")
        if "'" in value:
            raise UsageError(
                f"{flag!r}: a ' in a value breaks SageMaker's driver (it sources them in '...'); remove it"
            )
        if len(key) > MAX_KEY or len(value) > MAX_VALUE:
            raise UsageError(
                f"{flag[:60]!r}...: SageMaker limits a hyperparameter to {MAX_KEY} characters of "
                f"name and {MAX_VALUE} of value; put long settings in a --config_path file"
            )
        hps[key] = value
    return hps
