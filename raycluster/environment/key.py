"""What decides a job's environment, as one key: the requirements and constraints as staged, the image's own
packages (their names and versions: another image, another key) and its Python. Two starts with the same key
install the same files, so the second may take the first's."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import sys
from pathlib import Path


def image_packages() -> list[str]:
    """``name==version`` of every distribution the image holds (read before the environment is on the path)."""
    return sorted({f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()})


def environment_key(requirements: Path) -> str:
    """The key of the environment ``requirements`` (and the files it names with ``-c``/``-r``) makes here."""
    named = [requirements]
    for line in requirements.read_text().splitlines():
        flag, _, path = line.strip().partition(" ")
        if flag in ("-c", "-r") and path:
            named.append(requirements.parent / path)
    decided = {
        "files": {p.name: p.read_text() for p in named},
        "image": image_packages(),
        "python": sys.version,
        "machine": platform.machine(),
    }
    return hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()[:32]
