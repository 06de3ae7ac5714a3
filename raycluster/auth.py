"""Ray auth token files: made private from their first byte, never widened afterwards."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to a file only its owner can read, created 0600 (not chmod-ed after the write, which
    would leave a moment where it is readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT: set it before the write
        f.write(text)
    return path


def new_token(path: Path) -> Path:
    return write_private(path, secrets.token_hex(32))
