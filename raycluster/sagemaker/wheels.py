"""Wheels shipped with the job's code (``raycluster launch --wheel``): installed on this host before its Ray
node starts, without their dependencies, into node-local scratch put first on ``PYTHONPATH``, which the Ray
node, the job's driver and every worker inherit. The image's own packages are never changed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable

from raycluster.layout import SCRATCH, SHIPPED_WHEELS, SOURCE_DIR

log = logging.getLogger(__name__)

INSTALLED = SCRATCH / "wheels"
INSTALL_S = 600.0
"""The longest the install may take: local wheels, no index and no dependencies take seconds; a pip that hangs
(a full disk, a lock) must end the job with a reason, not hold every host until MaxRuntime."""


def install_shipped_wheels(environ, run: Callable[..., subprocess.CompletedProcess]) -> None:
    """Install every shipped wheel (none shipped: nothing changes). ``run``: how this process runs a command
    (``OrphanReaper.run``: as PID 1 a plain ``subprocess.run`` could read a failed install as a success)."""
    wheels = sorted((SOURCE_DIR / SHIPPED_WHEELS).glob("*.whl"))
    if not wheels:
        return
    names = [wheel.name for wheel in wheels]
    try:
        installed = run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(INSTALLED)]
            + [str(wheel) for wheel in wheels],
            INSTALL_S,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the shipped wheels {names} were not installed within {INSTALL_S:.0f} s") from None
    if installed.returncode != 0:
        said = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the shipped wheels {names} could not be installed: {said}")
    environ["PYTHONPATH"] = os.pathsep.join([str(INSTALLED), *filter(None, [environ.get("PYTHONPATH")])])
    log.info("installed %s over the image's packages (in %s)", ", ".join(names), INSTALLED)
