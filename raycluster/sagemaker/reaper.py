"""Zombie reaping for the container's PID 1."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


class OrphanReaper:
    """As the container's PID 1 (SageMaker's command mode execs us), orphaned grandchildren become our
    children: reap those zombies, but never our own subprocesses, which their Popen objects wait for."""

    def __init__(self) -> None:
        self.own: set[int] = set()
        if os.getpid() == 1:
            threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(2)
            for entry in os.listdir("/proc"):
                if entry.isdigit() and int(entry) not in self.own and self._is_my_zombie(entry):
                    try:
                        os.waitpid(int(entry), os.WNOHANG)
                    except ChildProcessError:
                        pass

    @staticmethod
    def _is_my_zombie(pid: str) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        return state == "Z" and ppid == "1"
