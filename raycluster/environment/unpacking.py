"""An environment's archive unpacked by several processes at once, and taken only once it proved whole.

A restore writes tens of thousands of files, and one Python process doing it spends most of its time parsing
headers and checking paths (``tarfile``'s ``data`` filter resolves every member's path), with the disk idle in
between. Here this process reads the headers and makes the directories, while a pool of processes writes the
regular files, each through ``tarfile``'s own ``extractall`` and ``data`` filter, and another hashes the archive.

Why files written side by side land where the filter says: while the pool writes, the tree holds only the
directories this process made and regular files, no links. A file goes to the pool only if its parent is a
directory this process made, whose parents were made so too, so its path is the path the filter checked. Every
other member (links, and anything under a link or under a directory the archive did not list before it) is
extracted afterwards by this process alone, in the archive's order, as a plain ``extractall`` would."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import tarfile
import time
from pathlib import Path

from raycluster.environment.archive import DIGEST

TASK_FILES = 500
TASK_BYTES = 64 << 20
"""A task of the pool: this many files, or this many bytes, whichever comes first (big files spread out)."""
POOL_MAX = 8
"""Processes beyond this add nothing: the headers this process reads come at a fixed pace."""
UNPACK_S = 1200.0
"""The longest an unpack may take; longer, it is refused (and the host installs instead)."""


def unpack(archive: Path, expected: str, into: Path) -> None:
    """``archive`` into ``into`` (absent before), if its SHA-256 is ``expected``: unpacked beside its place, and
    renamed in only once the whole archive proved to be what its record says; raises otherwise, leaving no
    ``into`` and no process."""
    partial = into.with_name(f".{into.name}.unpacking")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    deadline = time.monotonic() + UNPACK_S
    try:
        # Forked: spawned processes would import what started this one again, and a script with no main guard
        # (the bench's, a user's) would start over in each. A host's entry point forks here with no thread of
        # its own running: the S3 download's threads ended with it.
        with multiprocessing.get_context("fork").Pool(min(os.cpu_count() or 1, POOL_MAX)) as pool:
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
    finally:  # the pool's processes were stopped on the way out of its block, even mid-write
        shutil.rmtree(partial, ignore_errors=True)


def extract(archive: Path, into: Path, pool, deadline: float) -> None:
    """Every member of ``archive`` into ``into``: regular files by ``pool``'s tasks, the rest by this process
    once those tasks are done."""
    made, alone, directories, tasks = {""}, [], [], []
    files, size = [], 0
    with tarfile.open(archive, "r:") as tar:
        for member in tar:
            name = os.path.normpath(member.name)
            name = "" if name == "." else name
            plain = ".." not in member.name.split("/") and os.path.dirname(name) in made
            if plain and member.isdir():
                tarfile.data_filter(member, str(into))  # no path out (raises), as extractall would check it
                os.makedirs(into / name, 0o700, exist_ok=True)  # its own mode is given once its files are in
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
        # Links last, once no file is written beside them; the directories' modes and times after everything.
        tar.extractall(into, members=alone + directories, filter="data")


def done(task, deadline: float):
    """What the pool's ``task`` returned (or its error, raised here), by ``deadline``."""
    try:
        return task.get(max(0.0, deadline - time.monotonic()))
    except multiprocessing.TimeoutError:
        raise TimeoutError(f"unpacking took longer than {UNPACK_S:.0f}s") from None


def write_files(archive: Path, into: Path, members: list[tarfile.TarInfo]) -> None:
    """A pool task: these regular files of ``archive``, each through the ``data`` filter."""
    try:
        with tarfile.open(archive, "r:") as tar:
            tar.extractall(into, members=members, filter="data")
    except tarfile.FilterError as exc:  # its kinds need two arguments, and come back to the pool's caller as one
        raise tarfile.ExtractError(str(exc)) from None


def digest_of(archive: Path) -> str:
    """A pool task: the SHA-256 of the whole of ``archive``, beside the writes."""
    with archive.open("rb") as f:
        return hashlib.file_digest(f, DIGEST).hexdigest()
