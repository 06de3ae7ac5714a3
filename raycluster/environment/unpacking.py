"""An environment's archive unpacked by several processes at once, and taken only once it proved whole.

A restore writes tens of thousands of files, and one Python process doing it spends most of its time parsing
headers and checking paths (``tarfile``'s ``data`` filter resolves every member's path), with the disk idle in
between. Here this process reads the headers and makes the directories, while a pool of processes writes the
regular files, each through ``tarfile``'s own ``extractall`` and ``data`` filter, and hashes the archive.

Why files written side by side land where the filter says: while the pool writes, the tree holds only the
directories this process made and regular files, no links. A file goes to the pool only if its parent is a
directory this process made, whose parents were made so too, so its path is the path the filter checked. Every
other member (links, and anything under a link or under a directory the archive did not list before it) is
extracted afterwards by this process alone, in the archive's order, as a plain ``extractall`` would."""

from __future__ import annotations

import hashlib
import multiprocessing
import multiprocessing.pool
import os
import shutil
import signal
import tarfile
import time
from pathlib import Path

from raycluster.environment.archive import DIGEST

TASK_FILES = 500
TASK_BYTES = 64 << 20
"""A task of the pool: this many files, or this many bytes, whichever comes first (big files spread out)."""
POOL_MAX = 8
"""A bound, not measured beyond this machine's 2 cores: the one process reading headers paces the pool (38k
headers took it 1.4 s here)."""
UNPACK_S = 1200.0
"""The longest an unpack waits for its pool; longer, it is refused (and the host installs instead)."""


def unpack(archive: Path, expected: str, into: Path) -> None:
    """``archive`` into ``into`` (absent before), if its SHA-256 is ``expected``: unpacked beside its place, and
    renamed in only once the whole archive proved to be what its record says; raises otherwise, leaving no
    ``into`` and no process."""
    partial = into.with_name(f".{into.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    deadline = time.monotonic() + UNPACK_S
    try:
        with pool_of_processes() as pool:  # leaving it ends its processes, even mid-write
            hashed = pool.apply_async(digest_of, (archive,))
            broken = None
            try:
                extract(archive, partial, pool, deadline)
            except tarfile.TarError as exc:  # said below, after what its record says about it
                broken = exc
            found = done(hashed, deadline)
        if found != expected:
            raise ValueError(f"its SHA-256 is {found[:12]}…, its record says {expected[:12]}…")
        if broken is not None:
            raise broken
        partial.rename(into)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def pool_of_processes() -> multiprocessing.pool.Pool:
    """One process per core this one may use, up to ``POOL_MAX``, forked: spawned ones would import what started
    this one again, and a script with no main guard (a user's) would start over in each. The children take no
    lock another thread may hold: they only parse, write and hash. A host's entry point has no thread of its own
    running here (boto3's download threads are joined before its download returns)."""
    processes = min(len(os.sched_getaffinity(0)), POOL_MAX)
    return multiprocessing.get_context("fork").Pool(processes, initializer=stoppable)


def extract(archive: Path, into: Path, pool, deadline: float) -> None:
    """Every member of ``archive`` into ``into``: regular files by ``pool``'s tasks, the rest by this process
    once those tasks are done."""
    made, seen, alone, directories, tasks = {""}, set(), [], [], []
    files, size = [], 0
    with tarfile.open(archive, "r:") as tar:
        for member in tar:
            name = path_in(member.name)
            refuse_unless_new(member, name, seen)
            plain = ".." not in member.name.split("/") and os.path.dirname(name) in made
            if plain and member.isdir():
                tarfile.data_filter(member, str(into))  # no path out (raises), as extractall would check it
                if name:  # made as extractall makes it: the data filter gives a directory no mode of its own
                    os.mkdir(into / name)
                made.add(name)
                directories.append(member)
            elif plain and member.isreg():
                files.append(member)
                size += member.size
                if len(files) == TASK_FILES or size >= TASK_BYTES:
                    tasks.append(pool.apply_async(write_files, (archive, into, files)))
                    files, size = [], 0
            else:
                alone.append(member)
        tasks.append(pool.apply_async(write_files, (archive, into, files)))
        for task in tasks:
            done(task, deadline)
        # Links last, once no file is written beside them; the directories' times after everything.
        tar.extractall(into, members=alone + directories, filter="data")


def path_in(name: str) -> str:
    """Where a member's name puts it, relative to the place ("" for the place itself), as the data filter
    reads it (leading slashes dropped)."""
    path = os.path.normpath(name.lstrip("/"))
    return "" if path == "." else path


def refuse_unless_new(member: tarfile.TarInfo, name: str, seen: set[str]) -> None:
    """Raises on a second member at one path, or a hard link to a path no member before it had. One plain
    extract would overwrite, or write through a link made earlier, where the pool's order differs from the
    archive's; ``pack`` never writes either."""
    if name in seen:
        raise tarfile.ExtractError(f"{member.name!r} is in the archive twice")
    if member.islnk() and path_in(member.linkname) not in seen:
        raise tarfile.ExtractError(f"{member.name!r} links to {member.linkname!r}, which no member before it is")
    seen.add(name)


def done(task, deadline: float):
    """What the pool's ``task`` returned (or its error, raised here), by ``deadline``."""
    try:
        return task.get(max(0.0, deadline - time.monotonic()))
    except multiprocessing.TimeoutError:
        raise TimeoutError(f"unpacking took longer than {UNPACK_S:.0f}s") from None


def stoppable() -> None:
    """A pool process's start: SIGTERM ends it again. It was forked with this process's handler (the entry point
    keeps SIGTERM to stop the job in order), and the pool ends its processes with SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def write_files(archive: Path, into: Path, members: list[tarfile.TarInfo]) -> None:
    """A pool task: these regular files of ``archive``, each through the ``data`` filter."""
    try:
        with tarfile.open(archive, "r:") as tar:
            tar.extractall(into, members=members, filter="data")
    except Exception as exc:  # as one kind that survives the way back (a FilterError's kinds do not unpickle)
        raise tarfile.ExtractError(f"{type(exc).__name__}: {exc}") from None


def digest_of(archive: Path) -> str:
    """A pool task: the SHA-256 of the whole of ``archive``, beside the writes."""
    with archive.open("rb") as f:
        return hashlib.file_digest(f, DIGEST).hexdigest()
