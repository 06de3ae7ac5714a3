"""One actor per host: this host's part of every checkpoint, from the save to the checkpoint root, and back.

A host's shipping rank hands it the step directory its host's ranks wrote; the part store stages a copy keyed
by (name, attempt, part) outside the root, hashes it, and tells the keeper it has arrived. Only when the keeper
has every part of one attempt does it ask each host to place its part into its own root (on SageMaker: its own
``/opt/ml/checkpoints``, which SageMaker syncs to the job's one S3 URI; an S3 root: straight to S3), all hosts at
once. No bytes cross hosts to save a checkpoint, and no call here waits for another host.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.checkpoints.commits import PLACE_DEADLINE_S
from raycluster.checkpoints.effects import placed_files
from raycluster.checkpoints.manifest import CHUNK_BYTES, MANIFEST, manifest_of
from raycluster.checkpoints.name_calls import NameCalls
from raycluster.checkpoints.placements import NO_STAGED_COPY, TAKEN_BACK, Placements
from raycluster.checkpoints.roots import open_store
from raycluster.checkpoints.scratch import owned_suffix, remove_orphans
from raycluster.faults import NO_FAULTS, Faults

log = logging.getLogger(__name__)


def link_or_copy(source: Path, target: Path) -> None:
    """Hard-linked where the filesystem allows (LeRobot never rewrites a saved checkpoint), else copied."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


WORD_S = 60.0
"""How long a part store's call waits for the keeper to take its word (a part staged, placed, or not) before the
call returns. A word not waited for dies with a process that dies before it leaves, and Ray runs nothing again
(the call had returned); a call that returns only once its word is taken is run again, and says it anew."""

RESTARTS = 3
"""How many times Ray starts a host's part store again after its process died (its node alive): without it, every
later checkpoint would fail on that host's part for the rest of the run."""


def restarted() -> bool:
    """This actor was started again by Ray (Ray's own property would print a deprecation warning on every host)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)


@ray.remote(num_cpus=0, max_concurrency=8, max_restarts=RESTARTS, max_task_retries=-1)
class PartStore:
    """One host's part store. Every call to it is one Ray takes to the store started again when its process dies
    (``max_task_retries``: a call cut off by the death, or sent while Ray starts it again, is not lost): a stage
    starts over from the save on disk; a place of a part the dead process had staged tells the keeper it is not
    there, so its checkpoint fails at once instead of at the place deadline with every later commit waiting behind
    it; a removal of a placement the new process has no word of spares another attempt's part (``_spared``). A
    stage, a read and a retention's removal repeat harmlessly."""

    def __init__(
        self, root: str, staging_dir: str, keeper, faults: Faults = NO_FAULTS, turn_s: float = PLACE_DEADLINE_S
    ):
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        self.store, self.keeper, self.faults = open_store(root), keeper, faults
        Path(staging_dir).mkdir(parents=True, exist_ok=True)
        # What a part store that died had staged is of no use to anyone: its parts failed with it.
        remove_orphans(Path(staging_dir), "raycluster-parts-*")
        self.staging = Path(tempfile.mkdtemp(prefix="raycluster-parts-", suffix=owned_suffix(), dir=staging_dir))
        # turn_s: how long a call waits for its checkpoint's turn (as long as the keeper waits for a place).
        self.placements, self._calls, self.turn_s = Placements(), NameCalls(), turn_s
        if restarted():
            log.warning(
                "the checkpoint part store on %s died and was started again: what it was staging is staged again, "
                "what it had staged is gone (those checkpoints fail), the next checkpoints go on (its root's files "
                "are intact)",
                ray.util.get_node_ip_address(),
            )

    @staticmethod
    def _said(word, name: str) -> None:
        """The keeper took this word (``WORD_S``). Past that bound the word still waits in the keeper's queue and
        will be taken: said, and the call goes on; raising would tell the keeper that a staged part failed."""
        try:
            ray.get(word, timeout=WORD_S)
        except ray.exceptions.GetTimeoutError:
            log.warning("checkpoint %s: the keeper has not taken this part store's word in %.0f s", name, WORD_S)

    def _staged(self, name: str, attempt: int, part: int) -> Path:
        return self.staging / f"{name}.attempt{attempt}.part{part}"

    def stage(self, name: str, attempt: int, part: int, parts: int, source: str) -> int:
        """Copy ``source`` (this host's part of ``name``; a missing directory is an empty part) into staging,
        hash the copy, and hand its manifest to the keeper. Returns the bytes staged; raises if it could not
        be staged, after telling the keeper (the checkpoint then fails, and nothing of it is published)."""
        staged, started = self._staged(name, attempt, part), time.monotonic()
        try:
            # Never beside a place of it: Ray may take this stage and the keeper's place to a store started again.
            with self._calls.one_at_a_time(name, self.turn_s):
                unwanted = self.placements.may_place(name, attempt)
                if unwanted is not None:  # a place of it came first, or its removal: a copy would stay forever
                    log.info("part %d of checkpoint %s (attempt %d) not staged: %s", part, name, attempt, unwanted)
                    return 0
                shutil.rmtree(staged, ignore_errors=True)
                staged.mkdir(parents=True)
                for path in sorted(Path(source).rglob("*")) if Path(source).is_dir() else []:
                    if path.is_file() and path.name != MANIFEST:
                        link_or_copy(path, staged / path.relative_to(source))
                manifest = manifest_of(staged)
        except Exception as exc:
            shutil.rmtree(staged, ignore_errors=True)
            self.keeper.part_failed.remote(name, attempt, part, f"{type(exc).__name__}: {exc}")
            raise  # its shipper, a process that lives on, tells the keeper too
        me, size = ray.get_runtime_context().current_actor, sum(entry["size"] for entry in manifest.values())
        # Said again by a stage Ray runs again: the keeper takes the same part of one attempt once.
        self._said(self.keeper.part_arrived.remote(name, attempt, part, parts, manifest, me), name)
        log.info(
            "staged part %d of %d of checkpoint %s (attempt %d): %.1f MB in %.2fs",
            part,
            parts,
            name,
            attempt,
            size / 2**20,
            time.monotonic() - started,
        )
        return size

    def place(self, name: str, attempt: int, part: int, manifest: dict[str, dict], whole: dict | None) -> None:
        """The keeper has every part of ``name`` from ``attempt``: this one goes into this host's root (``whole``:
        it is the only part, published with this commit record in one rename). The keeper hears back either
        way, and writes the commit record into its own root once every host's part is in place."""
        staged = self._staged(name, attempt, part)
        try:
            with self._calls.one_at_a_time(name, self.turn_s):
                refused = self.placements.may_place(name, attempt)
                if refused is not None:
                    raise RuntimeError(f"not placed: {refused}")
                if not staged.is_dir():  # a place Ray took to this store started again: the part died with the old
                    self.placements.give_up(name, attempt)  # the keeper fails it: a stage run again stages nothing
                    raise RuntimeError(f"not placed: {NO_STAGED_COPY}")
                self.placements.placing(name, attempt, list(placed_files(manifest, whole is not None)))
                try:
                    self.faults.delay_publish(name)
                    if whole is not None:
                        (staged / MANIFEST).write_text(json.dumps(whole, indent=1))
                        self.store.publish(staged, name)
                    else:
                        self.store.place(staged, name, manifest)
                finally:  # a write that failed halfway after its removal gave up waiting leaves nothing either
                    taken_back = self._take_back(name, attempt)
                if taken_back:
                    raise RuntimeError(f"not placed: {TAKEN_BACK}")
        except Exception as exc:
            shutil.rmtree(staged, ignore_errors=True)
            self._said(self.keeper.part_placed.remote(name, attempt, part, f"{type(exc).__name__}: {exc}"), name)
            return
        self._said(self.keeper.part_placed.remote(name, attempt, part, None), name)

    def discard(self, name: str, attempt: int, part: int) -> None:
        shutil.rmtree(self._staged(name, attempt, part), ignore_errors=True)

    def delete(self, name: str, attempt: int | None = None, files: tuple[str, ...] = ()) -> None:
        """Retention (every attempt's; only the keeper decides it, SageMaker mirrors it to S3) or a failed placement
        (``attempt``'s, the ``files`` its place writes): this host's files of ``name``. That word may come after a
        newer attempt placed its part: that part stays. Given up before its turn: a place of it holding the turn
        takes back what it wrote, if this wait passes its bound."""
        if attempt is not None:
            self.placements.give_up(name, attempt)
        with self._calls.one_at_a_time(name, self.turn_s):
            removal = self.placements.removal(name, attempt, files)
            if removal is not None and not (removal.unheard and self._spared(name, attempt)):
                self._remove(name, removal.files)

    def _take_back(self, name: str, attempt: int) -> bool:
        """What this place wrote, gone again if its removal came meanwhile (which may give up waiting for it)."""
        taken = self.placements.written(name, attempt)
        if taken is not None:
            self._remove(name, taken.files)
            self.placements.taken_back(name, attempt)
        return taken is not None

    def _remove(self, name: str, files: tuple[str, ...] | None) -> None:
        if files is not None and self.store.shared:  # every host's root: this host's files alone
            self.store.delete_files(name, files)  # by key: no listing of the whole root first
        elif name in self.store.names():
            self.store.delete(name)

    def _spared(self, name: str, attempt: int) -> bool:
        """A removal with no word of its place here (not come yet, or came before Ray started this store again)
        spares another attempt's part (same file names): one the keeper says is committed or being placed (a host's
        own root holds no record), or this root's record names; the keeper silent, whatever lies there."""
        try:
            stands = ray.get(self.keeper.another_attempt_stands.remote(name, attempt), timeout=WORD_S)
        except ray.exceptions.GetTimeoutError:
            stands = True  # a part left behind, never another attempt's taken
        if not stands:
            stands = any(entry.get("attempt") != attempt for entry in (self.store.manifest(name) or {}).values())
        if stands:
            log.warning("checkpoint %s: attempt %d's removal came while another's part stands: kept", name, attempt)
        return stands

    def local_files(self, name: str, manifest: dict[str, dict]) -> dict[str, str]:
        """Which of ``manifest``'s files this host's root holds at their size: ``relpath -> local path`` (none on
        an S3 root, which no host holds: ``shared_root``)."""
        if self.store.shared or name not in self.store.names():
            return {}
        held = {}
        for relpath, entry in manifest.items():
            path = self.store.local_file(name, relpath)
            if path is not None and path.is_file() and path.stat().st_size == entry["size"]:
                held[relpath] = str(path)
        return held

    def shared_root(self) -> bool:
        """This host's root is every host's (an S3 prefix): a fetch on its node reads any file from the root itself,
        so no other host reads a byte for it."""
        return self.store.shared

    def read(self, name: str, relpath: str, offset: int) -> bytes:
        return self.store.read(name, relpath, offset, CHUNK_BYTES)

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


def part_stores_on_every_node(root: str, staging_dir: str, keeper, faults: Faults = NO_FAULTS) -> dict[str, object]:
    """A part store pinned to each node of the cluster (the driver's too): ``node id -> handle``."""
    stores = {}
    for node in ray.nodes():
        if node["Alive"]:
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            stores[node["NodeID"]] = PartStore.options(scheduling_strategy=strategy).remote(
                root, staging_dir, keeper, faults
            )
    return stores


def local_part_store(part_stores: dict | None):
    """The caller's node's part store, of ``part_stores`` (node id -> part store), when there is one."""
    return (part_stores or {}).get(ray.get_runtime_context().get_node_id())
