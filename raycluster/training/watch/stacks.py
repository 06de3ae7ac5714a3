"""Every Python stack of a rank's process and of its data-loader workers, taken on the rank's own node.

py-spy (which Ray's dashboard uses for its stack traces) reads a process from outside, even one the kernel
has stopped; it needs ptrace rights, which a training container may not have. Then faulthandler answers from
inside: every rank registers it on ``STACK_SIGNAL`` at its start (the handler is C, so it answers even while
the main thread is blocked in a collective or a C call), and its data-loader workers inherit it.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.training.watch.rank_process import started_at

log = logging.getLogger(__name__)

STACK_SIGNAL = signal.SIGUSR2
PY_SPY_TIMEOUT_S = 20.0
FAULTHANDLER_WAIT_S = 3.0


def stack_file(pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"raycluster-stacks-{pid}.txt"


def answer_stack_requests() -> None:
    """In a rank: write every thread's stack to ``stack_file(pid)`` on ``STACK_SIGNAL`` (appended: its
    data-loader workers, forked from it, write to the same file after the header the taker writes)."""
    out = stack_file(os.getpid()).open("a")  # kept open for the process's life: the handler writes to it
    faulthandler.register(STACK_SIGNAL, file=out, all_threads=True, chain=False)


def py_spy() -> str | None:
    found = Path(sys.executable).with_name("py-spy")
    return str(found) if found.is_file() else shutil.which("py-spy")


def process_state(pid: int) -> str:
    """The kernel's word: running, sleeping, stopped (SIGSTOP), a zombie, or gone."""
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return "gone"


def by_py_spy(pid: int, spy: str) -> str | None:
    try:
        done = subprocess.run(
            [spy, "dump", "--pid", str(pid), "--subprocesses", "--nonblocking"],
            capture_output=True,
            text=True,
            timeout=PY_SPY_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None
    return done.stdout if done.returncode == 0 and done.stdout.strip() else None


def catches(pid: int, signum: int) -> bool:
    """The process has a handler for ``signum`` (the kernel's SigCgt mask): one without it would be ended by
    the signal (a data-loader worker started by spawn, a compiler's worker, ffmpeg)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(mask, 16) >> (signum - 1) & 1)


def by_faulthandler(pid: int) -> str | None:
    """Each process in turn, a header before its answer; a stopped process cannot answer."""
    path = stack_file(pid)
    if not path.exists():
        return None
    try:
        children = [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return None
    children = [child for child in children if catches(child, STACK_SIGNAL)]
    start = path.stat().st_size
    for n, target in enumerate([pid, *children]):
        with path.open("a") as out:
            out.write(f"\n--- process {target} ({'the rank' if n == 0 else 'a data-loader worker'})\n")
        size = path.stat().st_size
        try:
            psutil.Process(target).send_signal(STACK_SIGNAL)
        except psutil.NoSuchProcess:
            continue
        deadline = time.monotonic() + FAULTHANDLER_WAIT_S
        while path.stat().st_size == size and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the handler writes thread by thread
    with path.open() as read:
        read.seek(start)
        text = read.read()
    return text if "File " in text else None


def take_stack(pid: int, spy: str | None) -> tuple[str, str]:
    """(how it was taken, the stacks), or ("none", why there are none)."""
    state = process_state(pid)
    if state == "gone":
        return "none", "the process has exited"
    if spy is not None and (text := by_py_spy(pid, spy)) is not None:
        return "py-spy", text
    if (text := by_faulthandler(pid)) is not None:
        return "faulthandler", text
    why = "py-spy is not installed or not allowed to read it (no ptrace rights)" if spy else "py-spy is missing"
    return "none", f"no stack: the process is {state}, so faulthandler cannot answer, and {why}"


@ray.remote(num_cpus=0)
class StackTaker:
    """On one node: the stacks of its ranks' processes, and the SIGKILL that ends a hung one."""

    def take(self, pids: list[int]) -> dict[int, tuple[str, str, str]]:
        """pid -> (process state, how taken, stacks); every process at once (py-spy may take seconds each)."""
        spy = py_spy()
        with ThreadPoolExecutor(max_workers=max(1, len(pids))) as pool:
            taken = pool.map(lambda pid: (pid, (process_state(pid), *take_stack(pid, spy))), pids)
            return dict(taken)

    def kill(self, processes: list[tuple[int, float]]) -> None:
        """Each (pid, start time) still that very process, with every process it started."""
        for pid, started in processes:
            try:
                end_family(pid, started)
            except Exception:  # one rank's failure must not spare the others on this node
                log.exception("ending rank process %d failed", pid)


def end_family(pid: int, started: float) -> list[int]:
    """SIGKILL ``pid`` if it is still the process that started at ``started`` (``started_at``), then every
    process it had started (its data-loader workers, a video decoder): reparented, a child outlives the rank it
    served, holding memory and /dev/shm. The rank is stopped before its children are listed, so it starts no
    more. The pids ended."""
    try:
        rank = psutil.Process(pid)
        if started_at(pid) != started:
            return []
        rank.suspend()
        family = [rank, *rank.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    ended = []
    for process in family:
        try:
            process.kill()
            ended.append(process.pid)
        except psutil.NoSuchProcess:
            pass
    return ended


def stack_taker(node_id: str):
    return StackTaker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
