"""Scratch that names the process it belongs to, so that what a killed process left behind is removed by the
next one that starts there: a fetch killed with its Ray worker leaves a whole checkpoint's files, and an
evaluation cancelled mid-run leaves its copy of the policy, once per killed attempt."""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

OWNER = re.compile(r"\.scratch-(?P<host>.+)-(?P<pid>\d+)$")


def owned_suffix() -> str:
    """The end of a scratch name that says who owns it: this host and this process."""
    return f".scratch-{socket.gethostname()}-{os.getpid()}"


def remove_orphans(parent: Path, pattern: str) -> list[Path]:
    """Remove what matches ``pattern`` under ``parent`` and was left by a process of this host that no longer
    runs. Another host's scratch (a folder two hosts share) and a living process's are never touched."""
    removed = []
    for path in parent.glob(pattern) if parent.is_dir() else ():
        owner = OWNER.search(path.name)
        if owner is None or owner["host"] != socket.gethostname():
            continue
        pid = int(owner["pid"])
        if pid == os.getpid() or psutil.pid_exists(pid):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        log.info("removed %d scratch folder(s) of killed processes under %s", len(removed), parent)
    return removed
