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

import json
import re
from typing import Any

from raycluster.errors import UsageError
from raycluster.sagemaker.entry_settings import ENTRY, EntrySettings
from raycluster.settings import parse_group

DOT = "__"
# What a key may hold after encoding: SM_HP_<KEY> must be a shell identifier once `-` became `_`. `\Z`, not
# `$`, which also matches before a final newline: `job_name\n` would break the driver's file under `set -e`.
KEY = re.compile(r"^[A-Za-z0-9_-]+\Z")
# CreateTrainingJob's limits on one hyperparameter.
MAX_KEY, MAX_VALUE = 256, 2500
# Older framework estimators add their own (sagemaker_program, sagemaker_submit_directory, ...).
SDK_KEY_PREFIX = "sagemaker_"


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


def split_hyperparameters(hps: dict[str, Any]) -> tuple[EntrySettings, list[str]]:
    """``entry.*`` keys become EntrySettings; all others become ``--name=value`` flags, in order."""
    flags = [
        f"--{flag_name(key)}={value_text(value)}" for key, value in hps.items() if not key.startswith(SDK_KEY_PREFIX)
    ]
    return parse_group(EntrySettings, ENTRY, flags, label=lambda name: f"{ENTRY}{DOT}{name}", noun="hyperparameter")


def driver_shell_texts(value: str) -> list[str]:
    """What SageMaker's driver writes between ``'...'`` for this value: JSON-decoded where it decodes (its
    ``safe_deserialize``), then as ``SM_HP_<KEY>`` (a string as it is, anything else as JSON) and inside
    ``SM_HPS``' JSON (its ``safe_serialize``)."""
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        decoded = value
    return [decoded if isinstance(decoded, str) else json.dumps(decoded), json.dumps(decoded)]


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
        if any("'" in text for text in driver_shell_texts(value)):
            raise UsageError(
                f"{flag!r}: SageMaker's driver would write a ' into the shell file it sources (in '...', after "
                "JSON-decoding the value: \\u0027 counts too), which breaks the job or runs the rest; remove it"
            )
        if len(key) > MAX_KEY or len(value) > MAX_VALUE:
            raise UsageError(
                f"{flag[:60]!r}...: SageMaker limits a hyperparameter to {MAX_KEY} characters of "
                f"name and {MAX_VALUE} of value; put long settings in a --config_path file"
            )
        hps[key] = value
    return hps
