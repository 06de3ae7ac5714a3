"""Zombie reaping for the container's PID 1, and the one way PID 1 runs a short command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path


class OrphanReaper:
    """As the container's PID 1 (SageMaker's command mode execs us), orphaned grandchildren become our
    children: reap those zombies, but never our own subprocesses, which their Popen objects wait for.

    A child of ours that exits is a zombie whose parent is 1, like an orphan: were the reaper to take its exit
    status first, Python's ``subprocess`` would read the lost status as 0 (a failed pip install as a success).
    So every command this process runs goes through ``run``, which starts the child and names it ours while
    no pass of the reaper can look (one lock), and forgets it only once its status is read."""

    def __init__(self) -> None:
        self.own: set[int] = set()
        self._passes = threading.Lock()
        if os.getpid() == 1:
            threading.Thread(target=self._loop, daemon=True).start()

    def run(self, args: Sequence[str], timeout_s: float, **popen) -> subprocess.CompletedProcess:
        """``subprocess.run(args, timeout=timeout_s, **popen)``, its exit status never taken by the reaper; past
        ``timeout_s`` the child is killed and ``subprocess.TimeoutExpired`` raised."""
        with self._passes:
            process = subprocess.Popen(args, **popen)
            self.own.add(process.pid)
        try:
            try:
                out, err = process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                # Bounded too: a grandchild that still holds the pipes would keep them open past the kill.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.communicate(timeout=5)
                raise
        finally:
            self.own.discard(process.pid)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def _loop(self) -> None:
        while True:
            time.sleep(2)
            with self._passes:
                self.reap_orphans()

    def reap_orphans(self) -> None:
        """One pass: every zombie whose parent is this process and that is not one of its own."""
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
        return state == "Z" and ppid == str(os.getpid())
