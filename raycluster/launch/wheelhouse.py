"""A job that needs no package index (``raycluster launch --wheelhouse``): the job's packages are resolved on
this machine for the hosts' platform (manylinux x86_64, the image's Python), downloaded as wheels into a
directory kept here (a second launch downloads only what changed), and the exact set uploaded as the
``wheelhouse`` channel, which SageMaker copies onto every host before the container starts. The hosts'
``requirements.txt`` then names that channel and no index, so each host's entry point installs from it alone.

pip does the work twice, both times as it is: a dry run resolves the whole set for the hosts' platform (its
``--report``), and ``pip download --no-deps`` fetches each resolved wheel but those the image provides (torch and
its CUDA libraries: the DLC's build stays, as without ``--wheelhouse``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from raycluster.environment.install import PipFailed, pip, resolved
from raycluster.errors import UsageError

CHANNEL = "wheelhouse"
ON_HOSTS = f"/opt/ml/input/data/{CHANNEL}"
DEFAULT_DIR = Path.home() / ".cache" / "raycluster" / "wheelhouse"
"""Where a bare ``--wheelhouse`` collects wheels, kept between launches."""
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
"""What the DLCs' hosts run (Ubuntu 22.04, glibc 2.35, x86_64): every manylinux tag up to it."""
IMAGE_PROVIDES = re.compile(r"^(torch|torchvision|torchaudio|triton|pytorch-triton|nvidia-.*)$")
"""Packages the image already holds, built for its CUDA: never downloaded, never shipped."""
NO_WHEEL = re.compile(r"No matching distribution found for (\S+)")


def host_requirement_lines() -> list[str]:
    """The lines that make the hosts' pip install from the channel and from nothing else."""
    return ["--no-index", f"--find-links {ON_HOSTS}"]


def pip_platform_args(python_version: str) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    return args + [arg for platform in PLATFORMS for arg in ("--platform", platform)]


def resolve_wheelhouse(
    requirements: Path,
    collected: Path,
    channel: Path,
    python_version: str,
    index_args: tuple[str, ...] = (),
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> list[str]:
    """Resolve ``requirements`` for the hosts, download what ``collected`` lacks into it (a wheel a user built
    there is found too), and copy the resolved wheels into ``channel`` (the collection may hold older ones).
    Returns their file names. Raises ``UsageError`` naming a package that has no wheel for the hosts' platform.
    ``index_args``: where pip looks (none: this machine's pip configuration)."""
    collected.mkdir(parents=True, exist_ok=True)
    looks = [*index_args, "--find-links", str(collected), *pip_platform_args(python_version)]
    with one_line(python_version):
        found = resolved(["--ignore-installed", *looks, "-r", str(requirements)], collected / ".report.json", run)
        every = {canonicalize_name(r.name): r.version for r in found}
        shipped = {name: version for name, version in every.items() if not IMAGE_PROVIDES.match(name)}
        pinned = [f"{name}=={version}" for name, version in sorted(shipped.items())]
        pip(["download", "--no-deps", "--quiet", "-d", str(collected), *looks, *pinned], "downloading", run)
    channel.mkdir(parents=True, exist_ok=True)
    names = []
    for wheel in sorted(collected.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if name in shipped and Version(shipped[name]) == version:
            shutil.copy2(wheel, channel / wheel.name)
            names.append(wheel.name)
    missing = sorted(set(shipped) - {parse_wheel_filename(n)[0] for n in names})
    if missing:
        raise UsageError(f"--wheelhouse: pip resolved {', '.join(missing)} but left no wheel of it in {collected}")
    return names


@contextmanager
def one_line(python_version: str) -> Iterator[None]:
    """pip's failure as ``UsageError``: the package with no wheel for the hosts, named, or pip's last error line."""
    try:
        yield
    except PipFailed as exc:
        missing = NO_WHEEL.search(exc.stderr)
        if missing:
            raise UsageError(
                f"--wheelhouse: {missing.group(1)} has no wheel for the hosts (manylinux x86_64, CPython "
                f"{python_version}) where pip looked; build one (pip wheel) into the wheelhouse directory and "
                "launch again"
            ) from None
        raise UsageError(f"--wheelhouse: pip failed: {exc}") from None
