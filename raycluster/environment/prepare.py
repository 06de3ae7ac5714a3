"""Each host's start: the job's environment restored or installed, before anything else of the job is imported.

In order: the overlay already on this host (a warm pool's persistent cache keeps it from the last job), the
archive stored under the key (S3), and only then an install (``install.py``: pip resolves, uv installs). An
overlay holds its marker before it is renamed into its place, so one found there is whole; one just installed
must import the job's modules before it is used or stored. One host stores the archive it installed; the others
install on their own at the same time, so none waits for another longer than its own install takes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raycluster.environment.archive import S3Archives, pack
from raycluster.environment.install import install
from raycluster.environment.key import environment_key
from raycluster.environment.unpacking import unpack

log = logging.getLogger(__name__)

MARKER = ".raycluster-environment.json"
CHECK_S = 300.0
"""The longest the import check of an environment may take."""
WARM_POOL_DIR = "raycluster-environment"


@dataclass(frozen=True)
class EnvironmentSettings:
    requirements: Path
    """The code channel's ``requirements.txt`` (its ``-c`` constraints beside it)."""
    root: Path
    """Where this host keeps environments: node-local scratch, or the warm pool's persistent cache."""
    check: tuple[str, ...]
    """Modules the environment must import (the job's own)."""
    cache_s3: str | None = None
    """``s3://`` prefix of the archives; None: none kept beyond this host."""
    stores: bool = False
    """This host stores the archive it installed (one host of the job)."""


def imports(overlay: Path, modules: tuple[str, ...], run: Callable[..., subprocess.CompletedProcess]) -> str | None:
    """Why the environment just installed in ``overlay`` is none (None: ``modules`` import from it). Checked
    once, where it is made: a restored one is that very environment (its archive's SHA-256, its key), and a kept
    one became complete by a rename, so neither pays for the imports again."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(overlay), os.environ.get("PYTHONPATH")]))}
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    try:
        done = run([sys.executable, "-c", code, *modules], env=env, timeout=CHECK_S, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        return f"importing {', '.join(modules)} took longer than {CHECK_S:.0f}s"
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else f"does not import: {lines[-1] if lines else done.returncode}"


def prepare_environment(settings: EnvironmentSettings, run: Callable[..., subprocess.CompletedProcess]) -> Path:
    """The overlay directory of this job's environment, ready: put it first on PYTHONPATH (and its ``bin`` on
    PATH). Raises if it can be neither restored nor installed. Other environments this host kept are removed once
    it is ready: a warm pool's cache holds one, however many requirements its jobs went through."""
    overlay = made(settings, run)
    for other in settings.root.iterdir():
        if other != overlay:
            other.unlink() if other.is_file() else shutil.rmtree(other, ignore_errors=True)
    return overlay


def made(settings: EnvironmentSettings, run: Callable[..., subprocess.CompletedProcess]) -> Path:
    key = environment_key(settings.requirements)
    settings.root.mkdir(parents=True, exist_ok=True)
    overlay = settings.root / key
    if (overlay / MARKER).is_file():  # complete: the marker is in it before it is renamed into its place
        log.info("environment %s: kept on this host (%s), nothing installed", key[:12], overlay)
        return overlay
    shutil.rmtree(overlay, ignore_errors=True)
    archives = s3_archives(settings.cache_s3, key)
    if archives is not None and restored(archives, key, overlay, settings):
        return overlay
    started = time.monotonic()
    making = overlay.with_name(f".{key}.installing")
    shutil.rmtree(making, ignore_errors=True)
    try:
        added = install(settings.requirements, making, run)
        # Checked before it takes its place (nothing of its own to import when the image had it all): one that
        # does not import is never kept for the next start.
        why = imports(making, settings.check, run) if added else None
        if why is not None:
            raise RuntimeError(f"the environment installed from {settings.requirements.name} {why}")
    except BaseException:  # nothing half installed is left on the host
        shutil.rmtree(making, ignore_errors=True)
        raise
    (making / MARKER).write_text(json.dumps({"key": key, "installed": added}, indent=1))
    making.rename(overlay)
    log.info("environment %s: %d packages installed in %.1fs", key[:12], len(added), time.monotonic() - started)
    if archives is not None and settings.stores:
        store(archives, key, overlay)
    return overlay


def s3_archives(uri: str | None, key: str) -> S3Archives | None:
    """The archives in ``uri``; None without one, or without boto3 (an image that lacks it: said, and installed)."""
    if not uri:
        return None
    try:
        return S3Archives(uri)
    except ImportError as exc:
        log.warning("environment %s: %s cannot be reached (%s); installing", key[:12], uri, exc)
        return None


def restored(archives: S3Archives, key: str, overlay: Path, settings: EnvironmentSettings) -> bool:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=settings.root, prefix=".fetching-") as tmp:
        archive = Path(tmp) / "environment.tar"
        try:
            digest = archives.fetch(key, archive)
        except Exception as exc:  # S3 out of reach (credentials, network): the install does not need it
            log.warning("environment %s: %s cannot be read (%s); installing", key[:12], archives.uri, exc)
            return False
        if digest is None:
            log.info("environment %s: none stored in %s yet; installing", key[:12], archives.uri)
            return False
        try:
            unpack(archive, digest, overlay)
        except Exception as exc:  # an archive that cannot be read whole is no environment: install instead
            log.warning("environment %s: the archive in %s is refused (%s); installing", key[:12], archives.uri, exc)
            return False
    if not (overlay / MARKER).is_file():  # a whole archive, but not of an environment raycluster made
        log.warning("environment %s: the archive in %s holds no %s; installing", key[:12], archives.uri, MARKER)
        shutil.rmtree(overlay, ignore_errors=True)
        return False
    log.info("environment %s: restored from %s in %.1fs, nothing installed", key[:12], archives.uri,
             time.monotonic() - started)  # fmt: skip
    return True


def store(archives: S3Archives, key: str, overlay: Path) -> None:
    """Stored for the next start; a failure is said and the job goes on (the next start installs again)."""
    with tempfile.TemporaryDirectory(dir=overlay.parent, prefix=".packing-") as tmp:
        try:
            archive = Path(tmp) / "environment.tar"
            uri = archives.store(key, archive, pack(overlay, archive))
            log.info("environment %s: stored in %s (%.0f MB)", key[:12], uri, archive.stat().st_size / 2**20)
        except Exception as exc:
            log.warning("environment %s: not stored in %s (%s); the next start installs again", key[:12],
                        archives.uri, exc)  # fmt: skip


def activate(overlay: Path, environ) -> None:
    """``overlay`` first on this process's path and on every child's (the Ray nodes, the driver, the workers)."""
    sys.path.insert(0, str(overlay))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(overlay), environ.get("PYTHONPATH")]))
    environ["PATH"] = os.pathsep.join(filter(None, [str(overlay / "bin"), environ.get("PATH")]))
