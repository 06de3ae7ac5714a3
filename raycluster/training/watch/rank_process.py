"""A rank's process as the watchdog sees it from outside its loop: when it started (so a reused pid is never
taken for it) and how many bytes it and its children have moved (data moving is progress)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil


class BytesMoved:
    """What process ``pid`` and every process it started have read and written so far, through read() and
    write() (Linux's rchar and wchar: files and pipes, and what a download writes to disk; not a socket's
    send/recv); a child that ended takes its count with it. Less what the count itself read: finding the
    children reads every process's /proc entry, ~300 bytes each, which on a busy node would otherwise look like
    data moving. 0 where it is not counted."""

    def __init__(self, pid: int):
        self.pid, self._own, self._me = pid, 0, psutil.Process()

    def __call__(self) -> int:
        me = self._me
        before = chars(me)
        try:
            process = psutil.Process(self.pid)
            family = [process, *process.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        total = sum(chars(member) for member in family)
        self._own += chars(me) - before
        return total - self._own


def chars(process: psutil.Process) -> int:
    """Bytes ``process`` has read and written (0 when gone, not ours, or not counted on this platform)."""
    try:
        io = process.io_counters()
    except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
        return 0
    return getattr(io, "read_chars", io.read_bytes) + getattr(io, "write_chars", io.write_bytes)


def started_at(pid: int) -> float:
    """When process ``pid`` started, in seconds since the machine booted (its start in clock ticks, from
    /proc/<pid>/stat): psutil's create_time adds the boot time as the wall clock has it when first asked, so a
    wall-clock step between the rank's asking and the killer's would make them disagree forever. Without /proc,
    create_time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # not there, or exited while read
        if Path("/proc/self/stat").exists():  # /proc is there: the process is gone
            raise psutil.NoSuchProcess(pid) from None
        return psutil.Process(pid).create_time()
    return int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
