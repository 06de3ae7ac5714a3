"""PID 1's zombie reaper and the commands PID 1 runs: an orphan's zombie is reaped, but the exit status of a
command this process runs is never taken by the reaper (Python's ``subprocess`` would read a lost status as 0,
and a failed pip install as a success), and a command that hangs is killed at its deadline."""

import os
import subprocess
import sys
import threading
import time

import pytest

from raycluster.sagemaker import wheels
from raycluster.sagemaker.reaper import OrphanReaper
from raycluster.sagemaker.wheels import install_shipped_wheels


def reaping_all_along(reaper: OrphanReaper, stop: threading.Event) -> threading.Thread:
    """The reaper's passes, back to back (not every 2 s as PID 1 runs them): the race at its widest."""

    def loop() -> None:
        while not stop.is_set():
            with reaper._passes:
                reaper.reap_orphans()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_commands_exit_status_is_never_taken_by_the_reaper_and_an_orphans_zombie_is_reaped():
    reaper, stop = OrphanReaper(), threading.Event()
    orphan = subprocess.Popen([sys.executable, "-c", "pass"])  # not ours through run: a zombie for the reaper
    thread = reaping_all_along(reaper, stop)
    try:
        codes = [
            reaper.run([sys.executable, "-c", "import time, sys; time.sleep(0.2); sys.exit(3)"], 10).returncode
            for _ in range(5)
        ]
        deadline = time.monotonic() + 10
        while orphan.poll() is None and time.monotonic() < deadline:  # its status gone to the reaper: ECHILD, 0
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert codes == [3] * 5
    with pytest.raises(ChildProcessError):
        os.waitpid(orphan.pid, os.WNOHANG)  # reaped already


def test_a_command_past_its_deadline_is_killed():
    reaper = OrphanReaper()
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        reaper.run([sys.executable, "-c", "import time; time.sleep(60)"], 0.5)
    assert time.monotonic() - started < 10
    assert reaper.own == set()


def test_a_failed_install_of_the_shipped_wheels_is_a_failure_even_with_the_reaper_at_work(tmp_path, monkeypatch):
    shipped = tmp_path / "code" / "wheels"
    shipped.mkdir(parents=True)
    (shipped / "broken-1.0-py3-none-any.whl").write_bytes(b"not a wheel")
    monkeypatch.setattr(wheels, "SOURCE_DIR", tmp_path / "code")
    monkeypatch.setattr(wheels, "SHIPPED_WHEELS", "wheels")
    monkeypatch.setattr(wheels, "INSTALLED", tmp_path / "installed")
    reaper, stop = OrphanReaper(), threading.Event()
    thread = reaping_all_along(reaper, stop)
    environ = {}
    try:
        with pytest.raises(RuntimeError, match=r"the shipped wheels \['broken-1.0-py3-none-any.whl'\] could not"):
            install_shipped_wheels(environ, reaper.run)
    finally:
        stop.set()
        thread.join(timeout=5)
    assert "PYTHONPATH" not in environ
