"""A pytest plugin that keeps the markers honest: a test marked neither ``cluster`` nor ``slow`` must start no Ray
(``make test-fast`` runs exactly those, in minutes). Whatever such a test starts, in this process or in a
process of its own, is seen two ways: a Ray process (GCS or raylet) that appears among this process's
descendants while the test is set up, runs or is torn down, and a Ray session directory under the
``RAY_TMPDIR`` the test is given (a process that detaches from this one still writes there). Either fails the
test, naming what started."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

RAY_PROCESSES = ("gcs_server", "raylet")
LOOK_EVERY_S = 0.1
MARKS = ("cluster", "slow")


def ray_processes_below(me: psutil.Process) -> dict[int, str]:
    found = {}
    for process in me.children(recursive=True):
        try:
            if process.name() in RAY_PROCESSES:
                found[process.pid] = process.name()
        except psutil.Error:
            continue
    return found


class Watch:
    """Ray processes that appear below this process, looked for every ``LOOK_EVERY_S`` on a thread of its own."""

    def __init__(self):
        self.me = psutil.Process()
        self.before = set(ray_processes_below(self.me))
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, name="ray-guard", daemon=True)
        self._thread.start()

    def _look(self) -> None:
        while True:
            self.seen |= {pid: name for pid, name in ray_processes_below(self.me).items() if pid not in self.before}
            if self._stop.wait(LOOK_EVERY_S):
                return

    def stop(self) -> dict[int, str]:
        self._stop.set()
        self._thread.join()
        return self.seen


WATCH = pytest.StashKey[tuple[Watch, Path, str | None]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Before any fixture of the test is set up (a module's own Ray counts against its first test)."""
    if not any(item.get_closest_marker(mark) for mark in MARKS):
        ray_tmp = Path(tempfile.mkdtemp(prefix="ray-guard-"))
        item.stash[WATCH] = (Watch(), ray_tmp, os.environ.get("RAY_TMPDIR"))
        os.environ["RAY_TMPDIR"] = str(ray_tmp)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After every fixture the test ends is torn down: what started under it fails it, at its teardown."""
    try:
        return (yield)
    finally:
        if WATCH in item.stash:
            check(item, *item.stash[WATCH])


def check(item, watch: Watch, ray_tmp: Path, saved: str | None) -> None:
    seen = watch.stop()
    # At the session's end the environment may be restored already (the session fixtures go first).
    os.environ.pop("RAY_TMPDIR", None) if saved is None else os.environ.__setitem__("RAY_TMPDIR", saved)
    sessions = sorted(p.name for p in ray_tmp.glob("ray/session_*"))
    shutil.rmtree(ray_tmp, ignore_errors=True)
    if seen or sessions:
        started = [f"{name} (pid {pid})" for pid, name in sorted(seen.items())] + sessions
        pytest.fail(
            f"{item.nodeid} started Ray ({', '.join(started)}) but is marked neither 'cluster' nor 'slow': mark it, "
            "so that `make test-fast` starts no Ray",
            pytrace=False,
        )
