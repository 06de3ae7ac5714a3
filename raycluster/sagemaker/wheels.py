"""Wheels shipped with the job's code (``raycluster launch --wheel``): installed on this host before its Ray
node starts, without their dependencies, into node-local scratch put first on ``PYTHONPATH``, which the Ray
node, the job's driver and every worker inherit. The image's own packages are never changed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from raycluster.layout import SCRATCH, SHIPPED_WHEELS, SOURCE_DIR

log = logging.getLogger(__name__)

INSTALLED = SCRATCH / "wheels"


def install_shipped_wheels(environ) -> None:
    """Install every shipped wheel (none shipped: nothing changes)."""
    wheels = sorted((SOURCE_DIR / SHIPPED_WHEELS).glob("*.whl"))
    if not wheels:
        return
    names = [wheel.name for wheel in wheels]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(INSTALLED)]
        + [str(wheel) for wheel in wheels],
        capture_output=True,
        text=True,
    )
    if installed.returncode != 0:
        said = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the shipped wheels {names} could not be installed: {said}")
    environ["PYTHONPATH"] = os.pathsep.join([str(INSTALLED), *filter(None, [environ.get("PYTHONPATH")])])
    log.info("installed %s over the image's packages (in %s)", ", ".join(names), INSTALLED)
