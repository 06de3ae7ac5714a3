"""Ending a command's process once its work is done, without Python's interpreter teardown.

With torch and LeRobot imported, Python's own teardown (freeing every module, after the atexit handlers)
takes about 2 s here, every run: after the summary is written, Ray is shut down and the last line is
logged, so the user would wait for nothing. The atexit handlers still run (logging's flush, Ray's, ...).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """``sys.exit(code)``, less the teardown; a plain ``sys.exit`` while a non-daemon thread still works
    (Python's own exit waits for it)."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
