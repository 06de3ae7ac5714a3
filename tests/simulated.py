"""Simulated SageMaker jobs started by tests (``raycluster sim`` in a process of its own), and what a sim
can leave behind when it is not stopped: its network namespaces and host processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from raycluster.checkpoints.store import LocalStore
from raycluster.sim.job import KILL_AFTER_S

REPO = Path(__file__).resolve().parent.parent
SIM_NAMESPACE = re.compile(r"^rc[0-9a-f]{4}-\S+")
# The sim itself, and each host's wrapper: every process of a host lives in that wrapper's PID namespace and
# dies with it (--kill-child).
SIM_PROCESS = re.compile(r"raycluster sim|unshare --pid --fork --mount-proc --uts --kill-child")


@dataclass
class Sim:
    """One ``raycluster sim`` run; its output goes to ``workdir/sim_output.txt``."""

    workdir: Path
    process: subprocess.Popen

    def finish(self, timeout: float = 600) -> dict:
        """Each host's exit code and failure file, once the sim has ended."""
        self.process.wait(timeout=timeout)
        result = self.workdir / "sim_result.json"
        assert result.exists(), self.output()[-3000:]
        return json.loads(result.read_text())["hosts"]

    def output(self) -> str:
        return (self.workdir / "sim_output.txt").read_text()

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self) -> None:
        """What SageMaker does to a job, then what the sim would do to its hosts, then by hand whatever is left:
        a test that fails mid-job leaves nothing running."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # the sim ends every host (SIGKILL after KILL_AFTER_S)
            try:
                self.process.wait(timeout=KILL_AFTER_S + 30)
            except subprocess.TimeoutExpired:
                for pid_file in self.workdir.glob("algo-*/host.pid"):
                    kill(int(pid_file.read_text()))
                self.process.kill()
                self.process.wait()
        for netns_file in self.workdir.glob("algo-*/netns"):
            tag = netns_file.read_text().split("-", 1)[0]
            for namespace in namespaces():
                if namespace.startswith(f"{tag}-"):
                    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def entry_pid(wrapper: int) -> int:
    """A simulated host's PID 1 (the container command), as this machine sees it."""
    return int(Path(f"/proc/{wrapper}/task/{wrapper}/children").read_text().split()[0])


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


STARTED: list[Sim] = []
"""Every sim this test process started: what ``assert_clean`` looks at (another run's sims on this machine are
none of a test's business)."""


def start_sim(workdir: Path, *args: str, cwd: Path = REPO) -> Sim:
    workdir.mkdir(parents=True, exist_ok=True)
    # Into a file, not a pipe: a pipe nobody reads until the end fills up (pip alone prints hundreds of
    # lines) and would stall every host's output, and so the hosts.
    with (workdir / "sim_output.txt").open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "raycluster", "sim", f"--workdir={workdir}", *args],
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    STARTED.append(Sim(workdir, process))
    return STARTED[-1]


def namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
    return [line.split()[0] for line in listed if SIM_NAMESPACE.match(line)]


def leftovers() -> list[str]:
    """What the sims this test process started left on this machine: their hosts' namespaces, the sim itself
    and each host's wrapper (every process of a host lives in the wrapper's PID namespace and dies with it)."""
    tags = {f.read_text().split("-", 1)[0] for sim in STARTED for f in sim.workdir.glob("algo-*/netns")}
    left = [f"namespace {name}" for name in namespaces() if name.split("-", 1)[0] in tags]
    for sim in STARTED:
        pids = [sim.process.pid] + [int(f.read_text()) for f in sim.workdir.glob("algo-*/host.pid")]
        for pid in pids:
            try:
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE and SIM_PROCESS.search(" ".join(process.cmdline())):
                    left.append(f"process {pid} {' '.join(process.cmdline())}")
            except psutil.NoSuchProcess:
                continue
    return left


def assert_clean() -> None:
    left = leftovers()
    assert not left, "left behind by a simulated job: " + "; ".join(left)


def wait_for_log(path: Path, text: str | re.Pattern, timeout: float = 300, sim: Sim | None = None) -> None:
    """Until ``text`` (a string, or a pattern searched for) is in ``path``; given the ``sim`` that writes it, no
    longer than that sim runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = path.read_text() if path.exists() else ""
        if text.search(log) if isinstance(text, re.Pattern) else text in log:
            return
        if sim is not None and sim.process.poll() is not None:
            raise AssertionError(f"the simulated job ended before {text!r} appeared in {path}")
        time.sleep(0.5)
    raise AssertionError(f"{text!r} never appeared in {path}")


def host_checkpoints(workdir: Path, host: str = "algo-1") -> Path:
    """What ``host``'s own /opt/ml/checkpoints holds of the job's checkpoints."""
    return workdir / host / "opt" / "ml" / "checkpoints" / "lerobot" / "checkpoints"


def synced(workdir: Path) -> Path:
    """What the job's checkpoint S3 URI holds once SageMaker has synced every host's /opt/ml/checkpoints to it
    (each host's files, a delete on any host mirrored): the hosts' trees merged, as a fresh copy each call."""
    merged = workdir / "synced-checkpoints"
    shutil.rmtree(merged, ignore_errors=True)
    merged.mkdir()
    for host in sorted(workdir.glob("algo-*")):
        if (host / "opt" / "ml" / "checkpoints").is_dir():
            shutil.copytree(host / "opt" / "ml" / "checkpoints", merged, dirs_exist_ok=True, symlinks=True)
    return merged


def synced_checkpoints(workdir: Path) -> Path:
    return synced(workdir) / "lerobot" / "checkpoints"


def assert_all_complete(root: Path) -> None:
    """Nothing in the checkpoint root looks complete unless it is."""
    store = LocalStore(root)
    assert all(store.problems(name) is None for name in store.names()), [(n, store.problems(n)) for n in store.names()]


def logged_steps(log: Path) -> list[int]:
    return [int(step) for step in re.findall(r"step:(\d+) ", log.read_text())]


def host_processes(workdir: Path, host: str, marker: str) -> list[int]:
    """Processes of one simulated host whose command line holds ``marker``, found among that host's own
    processes (this machine's pids: each host has a PID namespace of its own, and the pid a process logs is
    its pid in there)."""
    wrapper = psutil.Process(int((workdir / host / "host.pid").read_text()))
    found = []
    for process in wrapper.children(recursive=True):
        try:
            if marker in " ".join(process.cmdline()):
                found.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def training_workers(workdir: Path, host: str) -> list[int]:
    return host_processes(workdir, host, "ray::RayTrainWorker")


def actors_started(workdir: Path, host: str) -> list[str]:
    """The class of every actor a host's Ray node ran, from the first line of each worker's log."""
    named = []
    for out in (workdir / host / "scratch" / "ray").glob("session_*/logs/worker-*.out"):
        if found := re.search(rb":actor_name:(\w+)", out.read_bytes()[:500]):
            named.append(found.group(1).decode())
    return sorted(named)


def files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path.relative_to(root)))
            except OSError:  # a socket or a file Ray removed meanwhile
                pass
    return found
