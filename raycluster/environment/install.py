"""The environment installed into a directory of its own (put first on the path of every process of the job)
rather than into the image: pip's dry run resolves ``requirements.txt`` against the image and reports what it
lacks, and exactly those distributions are installed with ``--target``, by uv where it can be had (faster than
pip: ``make bench ARGS="--only environment"`` and docs/benchmarks.md), else by pip. The image is never
changed, so the directory is the whole difference, and an archive of it is the environment.

pip decides and uv only installs: uv is given the very files pip resolved (their URLs and SHA-256 from pip's
report), so it needs none of pip's index settings (``pip.conf``, ``PIP_INDEX_URL``, a wheelhouse's
``--find-links``), which it does not read."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

INSTALL_S = 1800.0
"""The longest pip or uv may take for one step (the whole set from an index on a slow line; a laptop's
resolution for ``--wheelhouse`` too)."""
UV = "uv"
"""The installer's distribution: one of the job's packages (raycluster's ``hosts`` extra), or the image's own."""


class PipFailed(RuntimeError):
    """pip (or uv) ended badly: its last error line as the message, all it said in ``stderr``."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True)
class Resolved:
    """One distribution pip's dry run would install."""

    name: str
    version: str
    url: str
    """Where pip found it (credentials redacted by pip's report)."""
    sha256: str | None = None
    """Its archive's SHA-256, as the index gave it to pip (None where none was given)."""

    def hashed(self) -> str:
        return f" --hash=sha256:{self.sha256}" if self.sha256 else ""


def bounded(command: list[str], what: str, run: Callable[..., subprocess.CompletedProcess]) -> None:
    """Run an installer's ``command``, bounded; raises ``PipFailed`` naming ``what``."""
    tool = Path(command[0]).name if command[0] != sys.executable else command[2]
    try:
        done = run(command, timeout=INSTALL_S, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        raise PipFailed(f"{what}: {tool} did not finish within {INSTALL_S:.0f}s") from None
    except OSError as exc:  # a uv binary that cannot run here (a noexec mount, another platform's)
        raise PipFailed(f"{what}: {tool} could not start: {exc}") from None
    if done.returncode != 0:
        lines = done.stderr.splitlines()
        said = [line for line in lines if line.startswith(("ERROR", "error"))] or lines
        raise PipFailed(f"{what}: {said[-1] if said else f'{tool} exit code {done.returncode}'}", done.stderr)


def pip(args: list[str], what: str, run: Callable[..., subprocess.CompletedProcess]) -> None:
    """``python -m pip ARGS`` with this Python, bounded; raises ``PipFailed`` naming ``what``."""
    bounded([sys.executable, "-m", "pip", *args], what, run)


def resolved(args: list[str], report: Path, run: Callable[..., subprocess.CompletedProcess]) -> list[Resolved]:
    """What ``pip install --dry-run ARGS`` would install, from its report (at ``report``, removed after)."""
    pip(["install", "--dry-run", "--quiet", "--report", str(report), *args], "resolving", run)
    try:
        items = json.loads(report.read_text())["install"]
    finally:
        report.unlink()
    return [
        Resolved(
            i["metadata"]["name"],
            i["metadata"]["version"],
            i["download_info"]["url"],
            i["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256"),
        )
        for i in items
    ]


def index_options(requirements: Path) -> list[str]:
    """The lines of ``requirements`` that say where pip looks (``--no-index``, ``--find-links`` ...)."""
    where = ("--index", "--extra-index", "--find-links", "--no-index", "--trusted-host")
    return [line.strip() for line in requirements.read_text().splitlines() if line.strip().startswith(where)]


def install(requirements: Path, into: Path, run: Callable[..., subprocess.CompletedProcess]) -> list[str]:
    """Install into ``into`` (a new directory) what ``requirements`` adds to the image; the distributions
    installed, as ``name==version``. Index options in ``requirements`` (``--no-index``, ``--find-links``) hold
    for the resolution and for pip's install."""
    into.mkdir(parents=True)
    where = index_options(requirements)
    log.info("installing what %s adds to the image, from %s", requirements.name,
             " ".join(where) or "the package index pip is configured with")  # fmt: skip
    lacking = resolved(["-r", str(requirements)], into.parent / f"{into.name}.report.json", run)
    if lacking and not with_uv(lacking, into, run):
        # The same index options, and the resolved set pinned (with the hashes pip saw, when it saw every one: pip
        # checks all or none): nothing is resolved twice, and no file that changed since is installed.
        every = all(r.sha256 for r in lacking)
        lines = [*where, *(f"{r.name}=={r.version}{r.hashed() if every else ''}" for r in lacking)]
        with requirements_file(into.parent / f"{into.name}.pinned.txt", lines) as pinned:
            pip(["install", "--quiet", "--no-deps", "--target", str(into), "-r", str(pinned)], "installing", run)
    return [f"{r.name}=={r.version}" for r in lacking]


def with_uv(lacking: list[Resolved], into: Path, run: Callable[..., subprocess.CompletedProcess]) -> bool:
    """Install ``lacking`` into ``into`` by uv: False where uv is neither among them nor in the image, or where it
    fails (said in one line, ``into`` emptied for pip). uv among them is installed first, alone, by pip."""
    ours = [r for r in lacking if r.name.lower() == UV]
    rest = [r for r in lacking if r.name.lower() != UV]
    try:
        if ours:
            wheel = ours[0].url + (f"#sha256={ours[0].sha256}" if ours[0].sha256 else "")
            pip(["install", "--quiet", "--no-deps", "--target", str(into), wheel], "installing uv", run)
            uv = [str(into / "bin" / UV)]
        elif importlib.util.find_spec(UV) is not None:
            uv = [sys.executable, "-m", UV]
        else:
            log.info("installing with pip: uv is neither in the image nor among the job's packages")
            return False
        if rest:
            # No --compile-bytecode (pip's --target compiles every module): the import check that follows compiles
            # what the job imports, and the archive carries that, in a third of the time.
            with requirements_file(
                into.parent / f"{into.name}.uv.txt", [f"{r.name} @ {r.url}{r.hashed()}" for r in rest]
            ) as pinned:
                bounded([*uv, "pip", "install", "--quiet", "--no-deps", "--no-cache", "--python", sys.executable,
                         "--target", str(into), "-r", str(pinned)], "installing", run)  # fmt: skip
    except PipFailed as exc:
        log.warning("uv could not install the job's packages (%s); installing them with pip", redacted(str(exc)))
        shutil.rmtree(into)
        into.mkdir()
        return False
    return True


@contextmanager
def requirements_file(path: Path, lines: list[str]) -> Iterator[Path]:
    """``lines`` as a requirements file at ``path`` for as long as an installer reads it."""
    path.write_text("".join(f"{line}\n" for line in lines))
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def redacted(text: str) -> str:
    """``text`` with the credentials of any URL in it replaced (an index's user and token)."""
    return re.sub(r"://[^/@\s]+@", "://***@", text)
