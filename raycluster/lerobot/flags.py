"""LeRobot's training flags read without importing LeRobot, which costs the driver ~8 s: the few plain values the
driver needs before any worker starts. Each is the flag's last value, else the ``--config_path`` file's, else
LeRobot's default. LeRobot itself parses and validates the flags on every rank before the first step
(``training/worker/flags_check.py``); a value it cannot read is refused there, in one line, before anything is
written. The output dir read here is pinned into the flags, so the driver and every rank use the same one; the
job name of a run whose policy comes from the Hub (``--policy.path=org/name``) is known only once LeRobot loads
it, so the default output dir and the Ray run's name say ``policy`` then (``--job_name`` chooses one)."""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml  # draccus's own dependency, so LeRobot's

from raycluster.errors import UsageError
from raycluster.lerobot.api import flag_value


@dataclass(frozen=True)
class TrainFlags:
    output_dir: str
    """``--output_dir``, else LeRobot's default as its ``validate()`` makes it (``outputs/train/<date>/<time>_<job>``)."""
    job_name: str
    resume: bool
    dataset_root: str | None
    eval_split: float
    """``--dataset.eval_split``: the share of episodes held out (LeRobot's default 0.0)."""
    has_env: bool
    """``--env.type`` given: LeRobot can roll the policy out in a simulation."""
    save_checkpoint: bool


class FlagView:
    """The flags, then the ``--config_path`` file (JSON, as LeRobot saves it, or YAML), by dotted name."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.file = config_file(flag_value(args, "config_path"))

    def get(self, name: str) -> str | None:
        given = flag_value(self.args, name)
        if given is not None:
            return given
        value = self.file
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return None if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    def trained_type(self) -> str:
        """The policy's type (or the reward model's), as LeRobot names the job after it; ``policy`` when it is
        only known once LeRobot loads a ``--policy.path`` that is not a local directory."""
        for model in ("policy", "reward_model"):
            given = self.get(f"{model}.type")
            if given:
                return given
            path = self.get(f"{model}.path")
            if path and (Path(path) / "config.json").is_file():
                return str(json.loads((Path(path) / "config.json").read_text()).get("type", model))
        return "policy"


def config_file(path: str | None) -> dict:
    """A ``--config_path``'s settings, as LeRobot reads it: a file (JSON, YAML or TOML) or a checkpoint's
    directory holding ``train_config.json``; {} when none is given. Anything else (a Hub id, an unreadable file)
    is refused: the driver would otherwise guess what the file says."""
    if not path:
        return {}
    file = Path(path) / "train_config.json" if Path(path).is_dir() else Path(path)
    try:
        text = file.read_text()
        loaded = tomllib.loads(text) if file.suffix == ".toml" else yaml.safe_load(text)  # JSON is YAML too
    except Exception as exc:  # no such file, or not JSON, YAML or TOML
        raise UsageError(
            f"--config_path={path}: not a readable config file here ({type(exc).__name__}); give a local "
            "train_config.json (download a Hub one first)"
        ) from None
    if not isinstance(loaded, dict):
        raise UsageError(f"--config_path={path}: holds no settings (a mapping of LeRobot's fields is expected)")
    return loaded


def boolean(view: FlagView, name: str, default: bool) -> bool:
    """A yes/no flag as LeRobot reads it (YAML's booleans); anything else refused, as LeRobot would."""
    text = view.get(name)
    if text is None:
        return default
    value = yaml.safe_load(text)
    if not isinstance(value, bool):
        raise UsageError(f"--{name}={text}: true or false")
    return value


def read_flags(args: list[str], now: dt.datetime) -> TrainFlags:
    """``args`` as LeRobot will resolve them, for what the driver needs; ``now``: when LeRobot's default output
    dir would be made."""
    view = FlagView(args)
    env = view.get("env.type")
    job_name = view.get("job_name") or (f"{env}_{view.trained_type()}" if env else view.trained_type())
    split = view.get("dataset.eval_split") or "0.0"
    try:
        eval_split = float(split)
    except ValueError:
        raise UsageError(
            f"--dataset.eval_split={split}: a share of the episodes between 0 and 1, such as 0.1"
        ) from None
    return TrainFlags(
        output_dir=view.get("output_dir") or f"outputs/train/{now:%Y-%m-%d}/{now:%H-%M-%S}_{job_name}",
        job_name=job_name,
        resume=boolean(view, "resume", False),
        dataset_root=view.get("dataset.root"),
        eval_split=eval_split,
        has_env=bool(env),
        save_checkpoint=boolean(view, "save_checkpoint", True),
    )
