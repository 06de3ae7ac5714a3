"""Paths in a run's flags mean what they mean where the user typed them, on every worker.

Ray Train runs each worker in a directory of its own inside Ray's session directory, so a relative
``--dataset.root`` or ``--output_dir`` would name something else there (a dataset LeRobot then tries to
download, checkpoints in Ray's temporary files). The driver makes them absolute first. A job submitted
with ``--working-dir`` runs in Ray's temporary copy of that directory: a relative place to *write* would
vanish with the copy, and a relative input that Ray did not copy (git-ignored) is not there: both refused.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from raycluster.cluster_config import ClusterConfig
from raycluster.errors import UsageError

# LeRobot flags that name a local file or directory. --policy.path may also be a Hub repo id: it is made
# absolute only when it exists here.
INPUTS = ("dataset.root", "config_path")
MAYBE_LOCAL = ("policy.path",)
OUTPUTS = ("output_dir",)
CLUSTER_OUTPUTS = ("checkpoint_dir", "model_dir", "staging_dir")


def in_ray_working_dir_copy(cwd: Path) -> bool:
    """A job submitted with ``--working-dir`` starts in Ray's unpacked copy of it."""
    return "working_dir_files" in cwd.parts and "runtime_resources" in cwd.parts


def _absolute(flag: str, value: str, cwd: Path, writes: bool) -> str:
    if not value or "://" in value or Path(value).is_absolute():
        return value
    if writes and in_ray_working_dir_copy(cwd):
        raise UsageError(
            f"{flag}={value} is relative, and this job runs in Ray's temporary copy of its --working-dir "
            f"({cwd}), which is deleted afterwards: give an absolute path"
        )
    if not writes and in_ray_working_dir_copy(cwd) and not (cwd / value).exists():
        raise UsageError(
            f"{flag}={value} is not in Ray's copy of the --working-dir ({cwd}): Ray uploads neither what "
            ".gitignore names (data/ and outputs/ here) nor files over its size limit; give an absolute path"
        )
    return str((cwd / value).resolve())


def pinned_output_dir(value: str, cwd: Path) -> str:
    """The output dir LeRobot would use when no ``--output_dir`` is given (its default, or a ``--config_path``
    file's), made absolute against ``cwd``. Inside Ray's working-dir copy it would vanish with the job: refused."""
    if in_ray_working_dir_copy(cwd) and not Path(value).is_absolute():
        raise UsageError(
            f"no --output_dir given, and the one LeRobot would use ({value}) lies in Ray's temporary copy of its "
            f"--working-dir ({cwd}), which is deleted afterwards: give --output_dir=ABSOLUTE_PATH"
        )
    return str((cwd / value).resolve())


def absolute_paths(cluster: ClusterConfig, lerobot_args: list[str], cwd: Path) -> tuple[ClusterConfig, list[str]]:
    """``cluster`` and ``lerobot_args`` with every relative path made absolute against ``cwd``."""
    changes = {
        name: _absolute(f"--cluster.{name}", getattr(cluster, name), cwd, writes=True) for name in CLUSTER_OUTPUTS
    }
    args = []
    for i, arg in enumerate(lerobot_args):
        name, sep, value = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or not sep:
            if arg.startswith("--") and arg[2:] in (*INPUTS, *MAYBE_LOCAL, *OUTPUTS) and i + 1 < len(lerobot_args):
                raise UsageError(f"{arg} {lerobot_args[i + 1]}: write path flags as {arg}=PATH")
            args.append(arg)
            continue
        if name in INPUTS or name in OUTPUTS:
            value = _absolute(f"--{name}", value, cwd, writes=name in OUTPUTS)
        elif name in MAYBE_LOCAL and (cwd / value).exists():
            value = _absolute(f"--{name}", value, cwd, writes=False)
        args.append(f"--{name}={value}")
    return dataclasses.replace(cluster, **changes), args
