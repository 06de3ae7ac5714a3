"""Where published checkpoints live, behind one small interface: a local directory or an S3 prefix.

A published checkpoint is a directory (``<name>/...``) whose manifest was written after every file.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Protocol

from raycluster.checkpoints.manifest import MANIFEST, inside, problems

log = logging.getLogger(__name__)
QUARANTINE = "quarantine"


def by_step(names) -> list[str]:
    """Checkpoint names (LeRobot's zero-padded steps) in step order. Never as text: LeRobot pads to
    ``max(6, len(str(steps)))``, so a run relaunched with more steps writes ``0505000`` after ``500000``."""
    return sorted((n for n in names if n.isascii() and n.isdigit()), key=int)  # not '²', which int() refuses


class CheckpointStore(Protocol):
    checks_content: bool
    """``problems`` reads every file against its checksum (else: names and sizes only; a fetch checks the bytes)."""
    shared: bool
    """Every host reads the same root (an S3 prefix), so any host serves any file of it."""

    def names(self) -> list[str]:
        """Every checkpoint directory present, complete or not, oldest step first."""

    def publish(self, staged: Path, name: str) -> None:
        """Make ``staged`` (manifest included) the checkpoint ``name``; complete or absent, never half."""

    def problems(self, name: str) -> str | None:
        """Why ``name`` is not complete and intact, or None."""

    def place(self, staged: Path, name: str, manifest: dict[str, dict]) -> None:
        """Put one host's part (``staged``, no manifest) into ``name`` beside the other hosts' parts; raises
        unless every file of ``manifest`` is then in the store at its size. Uncommitted until ``commit``."""

    def manifest(self, name: str) -> dict | None:
        """``name``'s commit record, None if it has none."""

    def commit(self, name: str, manifest: dict) -> None:
        """Write ``name``'s commit record (the manifest of every part), last: only this makes it complete."""

    def quarantine(self, name: str, reason: str) -> None:
        """Move ``name`` aside (never delete it) so it is not resumed from."""

    def delete(self, name: str) -> None:
        """The commit record first (a half-deleted checkpoint is never taken for complete), then the rest."""

    def local_file(self, name: str, relpath: str) -> Path | None:
        """Where one file of ``name`` lies on this host's disk; None for a root that is not a local directory."""

    def read(self, name: str, relpath: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of one file of ``name`` from ``offset`` (empty past its end): that file alone is
        read, never the rest of the checkpoint."""


class LocalStore:
    checks_content = True
    shared = False

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for leftover in list(self.root.glob(".incoming-*")) + list(self.root.glob(".replaced-*")):
            shutil.rmtree(leftover)  # staging of a publish that was cut short: never a checkpoint

    def names(self) -> list[str]:
        return by_step(p.name for p in self.root.iterdir() if p.is_dir())

    def publish(self, staged: Path, name: str) -> None:
        # A rename is atomic: staged on the root's filesystem (the run's staging dir; on SageMaker outside
        # the synced /opt/ml/checkpoints), the checkpoint appears whole, and nothing partial is ever seen.
        try:
            self._swap_in(staged, name)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        # Staged on another filesystem: copied next to the root first, under a name no reader takes for a
        # checkpoint (SageMaker's sync does see it: give the run a staging dir on the root's filesystem).
        incoming = self.root / f".incoming-{name}-{time.time_ns()}"
        try:
            shutil.copytree(staged, incoming)
        except (OSError, shutil.Error) as exc:
            shutil.rmtree(incoming, ignore_errors=True)  # a full disk keeps nothing half-copied
            shutil.rmtree(staged, ignore_errors=True)
            # shutil.Error lists (source, target, why) for every file; the first why says it all.
            why = exc.args[0][0][2] if isinstance(exc, shutil.Error) else str(exc)
            raise OSError(f"cannot publish checkpoint {name} into {self.root}: {why}") from None
        shutil.rmtree(staged)
        self._swap_in(incoming, name)

    def _swap_in(self, source: Path, name: str) -> None:
        final = self.root / name
        if final.exists():
            # The old copy is renamed away first, so `final` is always whole or absent; beside the source,
            # which (staged outside a synced root) keeps its deletion out of SageMaker's sight too.
            old = source.with_name(f".replaced-{name}-{time.time_ns()}")
            final.rename(old)
            try:
                source.rename(final)
            except OSError:
                old.rename(final)  # the previous copy stays rather than none
                raise
            shutil.rmtree(old)
        else:
            source.rename(final)

    def place(self, staged: Path, name: str, manifest: dict[str, dict]) -> None:
        final = self.root / name
        for relpath in manifest:
            target = inside(final, relpath)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(inside(staged, relpath), target)  # a rename on the root's filesystem, else a copy
        wrong = [r for r, entry in manifest.items() if inside(final, r).stat().st_size != entry["size"]]
        if wrong:
            raise OSError(f"checkpoint {name}: {wrong[:3]} not at their manifest's size in {self.root}")
        shutil.rmtree(staged, ignore_errors=True)

    def commit(self, name: str, manifest: dict) -> None:
        final = self.root / name
        final.mkdir(parents=True, exist_ok=True)  # a part-less host: the record alone (the files are elsewhere)
        incoming = final / f".{MANIFEST}.incoming"
        incoming.write_text(json.dumps(manifest, indent=1))
        incoming.rename(final / MANIFEST)

    def manifest(self, name: str) -> dict | None:
        record = self.root / name / MANIFEST
        return json.loads(record.read_text()) if record.is_file() else None

    def problems(self, name: str) -> str | None:
        return problems(self.root / name, self.manifest(name))

    def quarantine(self, name: str, reason: str) -> None:
        aside = self.root.parent / QUARANTINE / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        aside.parent.mkdir(parents=True, exist_ok=True)
        (self.root / name).rename(aside)
        log.warning("checkpoint %s is incomplete (%s): moved aside to %s", self.root / name, reason, aside)

    def delete(self, name: str) -> None:
        (self.root / name / MANIFEST).unlink(missing_ok=True)
        shutil.rmtree(self.root / name, ignore_errors=True)

    def local_file(self, name: str, relpath: str) -> Path | None:
        return inside(self.root / name, relpath)

    def read(self, name: str, relpath: str, offset: int, size: int) -> bytes:
        with inside(self.root / name, relpath).open("rb") as f:
            f.seek(offset)
            return f.read(size)

    def __str__(self) -> str:
        return str(self.root)
