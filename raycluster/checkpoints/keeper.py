"""The checkpoint keeper: a Ray actor on the driver's node (the head on SageMaker), the one coordinator of
a checkpoint root: it writes every checkpoint's commit record, and decides retention and what a resume takes.

A checkpoint's bytes never pass through it. Every host stages the saves the keeper picks (``pacing.py``) into
its own part store, which tells the keeper; once every part of one attempt has arrived (``PartSet``), the keeper
asks every host to place its part into the root, and writes the commit record (the manifest of every part)
after the last one is in place (``commits.py`` decides, ``part_commits.py`` carries it out).
The final model (one directory, from rank 0) is still sent here whole: it lands in the driver's model dir.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.checkpoints.commits import Commits
from raycluster.checkpoints.holds import Holds
from raycluster.checkpoints.manifest import MANIFEST, inside
from raycluster.checkpoints.part_commits import WORDS, PartCommits
from raycluster.checkpoints.part_store import link_or_copy, part_stores_on_every_node
from raycluster.checkpoints.parts import PART_DEADLINE_S
from raycluster.checkpoints.retention import Retention
from raycluster.checkpoints.roots import open_store
from raycluster.checkpoints.serving import FetchServing
from raycluster.checkpoints.store import LocalStore
from raycluster.faults import NO_FAULTS, Faults

log = logging.getLogger(__name__)

READ_LEASE_S = 300.0
"""How long a fetch holds its checkpoint against retention without reading a chunk."""
ATTACH_S = 300.0
"""The keeper and a part store on every node started and introduced: actors start a process each, slowly on a
busy node."""


@ray.remote(num_cpus=0, max_concurrency=4, concurrency_groups={WORDS: 4})
class CheckpointKeeper(PartCommits, FetchServing):
    def __init__(
        self,
        root: str,
        keep: int = 0,
        store=None,
        staging_dir: str = "",
        read_lease_s: float = READ_LEASE_S,
        part_deadline_s: float = PART_DEADLINE_S,
        faults: Faults = NO_FAULTS,
    ):
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        self.store, self.faults = store or open_store(root), faults
        if staging_dir:
            Path(staging_dir).mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix="raycluster-staging-", dir=staging_dir or None))
        # A restarted worker group fetches while the previous attempt's publish may still run (calls come
        # from several threads): retention spares what is being read, quarantine what is being published.
        self._lock = threading.Lock()
        self.retention = Retention(keep, read_lease_s)
        self._publishing: set[str] = set()
        """Names being published whole (``commit``); those published from parts are ``commits.placing``."""
        # Its ``complete`` names are checked once (published here, or verified against their manifest): never
        # hashed again in this run, neither at each save's retention nor in the stop window.
        self.commits = Commits(part_deadline_s)
        self.part_stores: list = []
        self.node_of: dict = {}
        self.curves = None
        # Checkpoints retention spares: each from its commit until its evaluation's outcome, and the best.
        self.holds = Holds(faults)

    def attach(self, part_stores: list, curves=None) -> None:
        """Every host's part store (retention deletes on all of them), and the curves to mark publishes in."""
        self.part_stores, self.curves = part_stores, curves
        nodes = ray.get([s.node_id.remote() for s in part_stores], timeout=60)  # asked while every host is up
        self.node_of = dict(zip(part_stores, nodes, strict=True))  # so a resume can name a host that is gone

    def attach_evals(self, evals) -> None:
        """The evaluation keeper: told of every commit, after the checkpoint is held for it."""
        self.holds.subscribe(evals)

    def detach_evals(self, best: str | None) -> list[str]:
        """The evaluations' end, waited for by the evaluation keeper: every hold released but the best's."""
        held = self.holds.end(best)
        self._retain()
        return held

    def unhold(self, name: str) -> None:
        self.holds.release(name)
        self._retain()

    def evaluation_holds(self) -> list[str]:
        return self.holds.names()

    def begin(self) -> str:
        token = uuid.uuid4().hex[:12]
        (self.staging / token).mkdir()
        return token

    def write(self, token: str, relpath: str, offset: int, data: bytes) -> None:
        path = inside(self.staging / token, relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("r+b" if offset else "wb") as f:
            f.seek(offset)
            f.write(data)

    def commit(self, token: str, name: str, manifest: dict[str, dict]) -> str:
        """Publish what ``token`` received as ``name`` (one directory, sent whole: the final model)."""
        staged = self.staging / token
        received = {str(p.relative_to(staged)): p.stat().st_size for p in staged.rglob("*") if p.is_file()}
        # Sizes here; the checksums are checked whenever a checkpoint is resumed from. Hashing every upload
        # twice would take CPU from training on the keeper's node for no gain over that.
        if received != {relpath: entry["size"] for relpath, entry in manifest.items()}:
            shutil.rmtree(staged)
            raise RuntimeError(f"checkpoint {name}: received files differ from the sender's manifest")
        with self._lock:
            self._publishing.add(name)
        try:
            (staged / MANIFEST).write_text(json.dumps(manifest, indent=1))
            self.faults.delay_publish(name)
            self.store.publish(staged, name)
            with self._lock:
                self.commits.complete.add(name)
                self.holds.take(name)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)  # a refused upload keeps nothing on disk
            raise
        finally:
            with self._lock:
                self._publishing.discard(name)
        log.info("published checkpoint %s to %s", name, self.store)
        self.holds.announce(name)
        if name.isdigit():
            self._retain()
        return name

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def adopt(self, token: str, source: str, manifest: dict[str, dict]) -> None:
        """Rank 0 on this node: take its files directly, hard-linked where the filesystem allows (LeRobot
        never rewrites a saved checkpoint), so nothing is copied through Ray."""
        for relpath in manifest:
            link_or_copy(inside(Path(source), relpath), inside(self.staging / token, relpath))

    def abort(self, token: str) -> None:
        shutil.rmtree(self.staging / token, ignore_errors=True)

    def _retain(self) -> None:
        """Keep the newest ``keep`` complete checkpoints and whatever is held, published or fetched (``Retention``
        decides); the commit record of each other one goes first, then every host's files of it."""
        if self.retention.keep < 1:
            return
        complete = self.complete_names()
        with self._lock:  # from here on no fetch may start on what goes
            go, fetched = self.retention.due(complete, self._in_use, time.monotonic())
            self.commits.complete.difference_update(go)
        for name in fetched:
            log.info("retention: checkpoint %s is being fetched; deleted once its fetches end", name)
        for name in go:
            with self._lock:  # a step saved again may have begun publishing under this name meanwhile
                if self._in_use(name):
                    self.retention.deleted(name)
                    continue
            try:
                self.store.delete(name)  # the commit record first: from here on nobody takes it for complete
            except Exception as exc:  # S3 refusing, say: tried again at a later save, the others go on
                log.warning("retention: checkpoint %s not deleted (%s); tried again at a later save", name, exc)
                with self._lock:
                    self.retention.deleted(name)
                continue
            for holder in self.part_stores:  # every host's own files of it (a shared root: already gone)
                holder.delete.remote(name)
            with self._lock:
                self.commits.holders.pop(name, None)
                self.retention.deleted(name)
            log.info("retention (keep %d): deleted checkpoint %s", self.retention.keep, name)

    def _in_use(self, name: str) -> bool:
        """Held, or (a step saved again) being published anew: its record may be new."""
        return name in self.holds or name in self._publishing or name in self.commits.placing

    def complete_names(self) -> list[str]:
        """Every complete checkpoint, oldest step first: each checked against its manifest once in this keeper's
        life (what it published itself, never), so that neither a save's retention nor the stop window hashes
        every kept checkpoint again. A resume (``newest_complete``) reads its checkpoint in full."""
        answered: dict = {}  # each part store asked at most once a call (an earlier run's checkpoints)
        return [n for n in self.store.names() if self._listed_complete(n, answered)]

    def _listed_complete(self, name: str, answered: dict) -> bool:
        if name in self.retention.deleting:  # its deletion has begun: never complete again in this keeper's eyes
            return False
        if name in self.commits.complete:
            return True
        complete = self.store.problems(name) is None  # S3: names and sizes only, no download
        if not complete:  # an earlier run's, on node-local roots: its parts where the hosts placed them
            complete = self._found_on_hosts(name, answered)[0]
        if complete and self.store.checks_content:
            self.commits.complete.add(name)
        return complete


def keeper_on_this_node(
    root: str, keep: int = 0, local_name_root: bool = False, staging_dir: str = "", faults: Faults = NO_FAULTS
):
    """A keeper pinned to the caller's node (the driver's). ``local_name_root``: ``root`` itself holds
    the published names (e.g. ``/opt/ml/model/pretrained_model``), not ``root/checkpoints``.
    ``staging_dir``: where checkpoints are assembled, on the root's filesystem (default: a temp dir)."""
    node_id = ray.get_runtime_context().get_node_id()
    return CheckpointKeeper.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    ).remote(root, keep, LocalStore(Path(root)) if local_name_root else None, staging_dir, faults=faults)


def keeper_and_part_stores(
    root: str, keep: int, staging_dir: str, curves=None, faults: Faults = NO_FAULTS
) -> tuple[object, dict]:
    """The keeper of ``root`` on the caller's node, and a part store on every node: what training and the
    sharded-checkpoint test job both publish through."""
    keeper = keeper_on_this_node(root, keep, staging_dir=staging_dir, faults=faults)
    part_stores = part_stores_on_every_node(root, staging_dir, keeper, faults)
    # Bounded: the actors start on every node first (a process each), then the keeper asks each part store (60 s).
    ray.get(keeper.attach.remote(list(part_stores.values()), curves), timeout=ATTACH_S)
    return keeper, part_stores
