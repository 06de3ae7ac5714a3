"""The watchdog against real processes, without Ray: ranks in processes of their own, each with its real
``ProgressBeacon`` thread beating over a pipe to a real board (``Beats``) that a real ``Watchdog`` thread reads,
stacks taken by py-spy and ranks ended by ``end_family``, as each node's ``StackTaker`` does.

- Two ranks joined by a gloo process group, each with 2 data-loader workers: rank 0's loader stalls (its workers
  wait on a read that never comes back), rank 1 waits in ``all_reduce``. Both beat on, neither steps: the
  verdict names both, and every rank and every loader worker is gone right after it.
- A rank publishing whose child uploads (reads a file) at 1 MiB/s for 3 times the allowance: no verdict while
  bytes move; once the upload stops moving and the child hangs, the verdict comes, and the child is ended too.
"""

from __future__ import annotations

import base64
import contextlib
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from raycluster.training.watch.progress import Beats
from raycluster.training.watch.rank_process import started_at
from raycluster.training.watch.stacks import end_family, process_state, py_spy, take_stack
from raycluster.training.watch.watchdog import Allowances, Watchdog, Watched

ALLOWED_S = 3.0
"""Every activity's allowance here: a step takes milliseconds."""
ALLOW = Allowances(ALLOWED_S, ALLOWED_S, ALLOWED_S, ALLOWED_S, ALLOWED_S, 120.0)

RANK = """
import base64, os, pickle, sys, threading, time
from raycluster.training.watch.progress import ProgressBeacon
rank, world, mode, shared = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = threading.Lock()
def send(beat):
    with out:
        sys.stdout.write(base64.b64encode(pickle.dumps(beat)).decode() + "\\n")
        sys.stdout.flush()
beacon = ProgressBeacon(send, rank, 1, (f"algo-{rank + 1}", f"node{rank}"), every_s=0.25, world_size=world)
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
class Samples(Dataset):
    def __len__(self):
        return 10**6
    def __getitem__(self, i):
        if rank == 0 and i >= 40:  # rank 0's loader stalls: a read that never comes back
            time.sleep(3600)
        return torch.ones(2)
if mode == "loader":
    dist.init_process_group("gloo", init_method=f"file://{shared}", rank=rank, world_size=world)
    beacon.now("starting")
    for step, batch in enumerate(DataLoader(Samples(), batch_size=4, num_workers=2), 1):
        dist.all_reduce(batch)
        beacon.after_step(step, 0.0, None)
else:  # publishing: a child uploads (reads a file) at 1 MiB/s for a while, then hangs
    beacon.now("publishing")
    upload = "import sys, time\\nf = open(sys.argv[1], 'rb')\\nt = time.monotonic()\\n"
    upload += "while time.monotonic() - t < float(sys.argv[2]):\\n    f.seek(0); f.read(1 << 17); time.sleep(0.125)\\n"
    upload += "time.sleep(3600)\\n"
    import subprocess
    subprocess.run([sys.executable, "-c", upload, shared, sys.argv[5]])
"""


class Ranks:
    """Rank processes beating over their stdout to one board, and a watchdog on it (its verdicts kept)."""

    def __init__(self, tmp_path: Path, world: int, mode: str, *extra: str):
        self.board, self.lock, self.verdicts = Beats(), threading.Lock(), []
        shared = tmp_path / ("store" if mode == "loader" else "payload")
        if mode != "loader":
            shared.write_bytes(b"x" * (1 << 17))
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-c", RANK, str(r), str(world), mode, str(shared), *extra],
                stdout=subprocess.PIPE,
                text=True,
            )
            for r in range(world)
        ]
        for process in self.processes:
            threading.Thread(target=self._read, args=(process,), daemon=True).start()
        spy = py_spy()
        watched = Watched(
            failed_through=lambda: 0,
            beats=lambda failed: self._locked(lambda: self.board.newest_attempt(time.monotonic(), failed)),
            hang_seen=lambda group, line: self.verdicts.append((time.monotonic(), line)),
            take_stacks=lambda ranks: {b.pid: (process_state(b.pid), *take_stack(b.pid, spy)) for b in ranks},
            end_ranks=lambda ranks: [end_family(b.pid, b.started) for b in ranks],
        )
        self.seen: set[int] = set()
        self.done = threading.Event()
        self.watchdog = Watchdog(watched, ALLOW, [tmp_path / "report"])
        self.watchdog.start(self.done)

    def _locked(self, call):
        with self.lock:
            return call()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            beat = pickle.loads(base64.b64decode(line))
            self._locked(lambda beat=beat: self.board.beat(beat, time.monotonic()))

    def family(self) -> list[int]:
        """Every rank's pid and its children's (the loader workers, an upload); each is kept, to be ended at the
        close even once reparented."""
        pids = []
        for process in self.processes:
            try:
                pids += [process.pid, *(c.pid for c in psutil.Process(process.pid).children(recursive=True))]
            except psutil.NoSuchProcess:
                pass
        self.seen.update(pids)
        return pids

    def close(self) -> None:
        self.done.set()
        self.family()
        for pid in self.seen:  # only processes this test started: each was a rank or a child of one
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        for process in self.processes:
            process.wait()


def gone(pid: int) -> bool:
    return process_state(pid) in ("gone", "zombie")


def test_ranks_that_beat_but_never_step_are_named_and_ended_with_their_loader_workers(tmp_path):
    ranks = Ranks(tmp_path, 2, "loader")
    try:
        deadline = time.monotonic() + 120
        while len(ranks.family()) < 6:  # two ranks, two loader workers each
            assert time.monotonic() < deadline, "the ranks never started their loaders"
            time.sleep(0.2)
        family = ranks.family()
        while not ranks.verdicts:
            assert time.monotonic() < deadline, "no verdict on ranks that stopped stepping"
            time.sleep(0.2)
        verdict_at, line = ranks.verdicts[0]
        print(line)
        assert "rank 0 on algo-1" in line and "rank 1 on algo-2" in line, line
        assert " hung (training, " in line and "stuck" not in line, line  # both beat: neither is silent
        while not all(gone(pid) for pid in family):
            assert time.monotonic() < verdict_at + 10, [(pid, process_state(pid)) for pid in family]
            time.sleep(0.1)
        stacks = (tmp_path / "report" / "raycluster_hang_attempt1.txt").read_text()
        assert "stacks by py-spy" in stacks and "all_reduce" in stacks, stacks[:3000]
    finally:
        ranks.close()


def test_an_upload_that_moves_bytes_is_no_hang_until_it_stops(tmp_path):
    moving_s = 3 * ALLOWED_S
    ranks = Ranks(tmp_path, 1, "publishing", str(moving_s))
    try:
        deadline = time.monotonic() + 60
        while len(ranks.family()) < 2:
            assert time.monotonic() < deadline, "the upload never started"
            time.sleep(0.1)
        uploading_since, family = time.monotonic(), ranks.family()
        assert all(started_at(pid) for pid in family)
        while time.monotonic() < uploading_since + moving_s:
            assert not ranks.verdicts, ranks.verdicts  # bytes moving: progress, for 3 times the allowance
            time.sleep(0.1)
        while not ranks.verdicts:
            assert time.monotonic() < uploading_since + moving_s + ALLOWED_S + 10, "no verdict once the upload hung"
            time.sleep(0.1)
        print(ranks.verdicts[0][1])
        assert "rank 0 on algo-1" in ranks.verdicts[0][1] and "(publishing, " in ranks.verdicts[0][1]
        while not all(gone(pid) for pid in family):
            assert time.monotonic() < ranks.verdicts[0][0] + 10, [(pid, process_state(pid)) for pid in family]
            time.sleep(0.1)
    finally:
        ranks.close()
