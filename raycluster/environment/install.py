"""The environment installed by pip, as pip installs it, into a directory of its own (put first on the path of
every process of the job) rather than into the image: a dry run resolves ``requirements.txt`` against the image
and reports what it lacks, and exactly those distributions are installed with ``--target``. The image is never
changed, so the directory is the whole difference, and an archive of it is the environment."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

INSTALL_S = 1800.0
"""The longest pip may take for one step (the whole set from an index on a slow line; a laptop's resolution for
``--wheelhouse`` too)."""


class PipFailed(RuntimeError):
    """pip ended badly: its last error line as the message, all it said in ``stderr``."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


def pip(args: list[str], what: str, run: Callable[..., subprocess.CompletedProcess]) -> None:
    """``python -m pip ARGS`` with this Python, bounded; raises ``PipFailed`` naming ``what``."""
    try:
        done = run([sys.executable, "-m", "pip", *args], timeout=INSTALL_S, text=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise PipFailed(f"{what}: pip did not finish within {INSTALL_S:.0f}s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()
        raise PipFailed(f"{what}: {said[-1] if said else f'pip exit code {done.returncode}'}", done.stderr)


def resolved(args: list[str], report: Path, run: Callable[..., subprocess.CompletedProcess]) -> dict:
    """What ``pip install --dry-run ARGS`` would install, ``{name: version}``, from its report (at ``report``,
    removed after)."""
    pip(["install", "--dry-run", "--quiet", "--report", str(report), *args], "resolving", run)
    try:
        return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    finally:
        report.unlink()


def index_options(requirements: Path) -> list[str]:
    """The lines of ``requirements`` that say where pip looks (``--no-index``, ``--find-links`` ...)."""
    where = ("--index", "--extra-index", "--find-links", "--no-index", "--trusted-host")
    return [line.strip() for line in requirements.read_text().splitlines() if line.strip().startswith(where)]


def install(requirements: Path, into: Path, run: Callable[..., subprocess.CompletedProcess]) -> list[str]:
    """Install into ``into`` (a new directory) what ``requirements`` adds to the image; the distributions
    installed, as ``name==version``. Index options in ``requirements`` (``--no-index``, ``--find-links``) hold
    for both steps."""
    into.mkdir(parents=True)
    where = index_options(requirements)
    log.info("installing what %s adds to the image, from %s", requirements.name,
             " ".join(where) or "the package index pip is configured with")  # fmt: skip
    report = into.parent / f"{into.name}.report.json"
    lacking = [f"{name}=={version}" for name, version in resolved(["-r", str(requirements)], report, run).items()]
    if lacking:
        # The same index options, and the resolved set pinned: nothing is resolved twice.
        pinned = into.parent / f"{into.name}.pinned.txt"
        pinned.write_text("\n".join([*where, *lacking]) + "\n")
        try:
            pip(["install", "--quiet", "--no-deps", "--target", str(into), "-r", str(pinned)], "installing", run)
        finally:
            pinned.unlink()
    return lacking
