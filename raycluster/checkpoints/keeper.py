"""The checkpoint keeper: a Ray actor on the driver's node (the head on SageMaker), the one coordinator of
a checkpoint root: it writes every checkpoint's commit record, and decides retention and what a resume takes.

A checkpoint's bytes never pass through it. Every host stages the saves the keeper picks (``pacing.py``) into
its own part store, which tells the keeper; once every part of one attempt has arrived (``PartSet``), the keeper
asks every host to place its part into the root, and writes the commit record (the manifest of every part)
after the last one is in place (``commits.py`` decides, ``part_commits.py`` carries it out).
This is the one way anything is published: the run's model is read back from a committed checkpoint
(``export.py``), never sent here whole.

The actor is a shell over components that each keep to one side of the root, each handed what it uses:
``PartCommits`` (the commit protocol: a part arrived, failed, placed; the record written last), ``FetchServing``
(what a resume takes, which host serves each file, the fetches' read leases, quarantine), ``HostRoots`` (every
host's part store), and retention here (``Retention`` decides, after each publish and each fetch's end). Their
state (``Commits``, ``Retention``, ``Holds``) is changed under one lock, never held across a call to a host.

The calls, in the order a run makes them: ``attach`` (the hosts' part stores, once every node is up);
``newest_complete``, then ``manifest`` / ``sources`` / ``read`` / ``release`` for each node's fetch (a resume);
``begin_attempt`` per worker group; per save ``saved`` (rank 0's host) and ``pick``, then from every host
``part_arrived`` (or ``part_failed``), then ``part_placed``, and ``outcome`` to learn the verdict;
``complete_names`` at the end. ``quarantine`` whenever a fetch finds a file that is not what its record says.
"""

from __future__ import annotations

import logging
import threading
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.checkpoints.commits import PLACE_DEADLINE_S, Commits
from raycluster.checkpoints.holds import Holds
from raycluster.checkpoints.hosts import HostRoots
from raycluster.checkpoints.pacing import Pick
from raycluster.checkpoints.part_commits import WORDS, PartCommits
from raycluster.checkpoints.part_store import part_stores_on_every_node
from raycluster.checkpoints.parts import PART_DEADLINE_S
from raycluster.checkpoints.retention import Retention
from raycluster.checkpoints.roots import open_store
from raycluster.checkpoints.serving import FetchServing
from raycluster.faults import NO_FAULTS, Faults

log = logging.getLogger(__name__)

READ_LEASE_S = 300.0
"""How long a fetch holds its checkpoint against retention without reading a chunk."""
ATTACH_S = 300.0
"""The keeper and a part store on every node started and introduced: actors start a process each, slowly on a
busy node."""


@ray.remote(num_cpus=0, max_concurrency=4, concurrency_groups={WORDS: 4})
class CheckpointKeeper:
    def __init__(
        self,
        root: str,
        keep: int = 0,
        read_lease_s: float = READ_LEASE_S,
        part_deadline_s: float = PART_DEADLINE_S,
        faults: Faults = NO_FAULTS,
        place_deadline_s: float = PLACE_DEADLINE_S,
    ):
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        self.store = open_store(root)
        # A restarted worker group fetches while the previous attempt's publish may still run (calls come
        # from several threads): retention spares what is being read, quarantine what is being published.
        self._lock = threading.Lock()
        self.retention = Retention(keep, read_lease_s)
        # Its ``complete`` names are checked once (committed here, or verified against their manifest): never
        # hashed again in this run, neither at each save's retention nor in the stop window.
        self.commits = Commits(part_deadline_s, place_deadline_s)
        # Checkpoints retention spares: each from its commit until its evaluation's outcome, and the best.
        self.holds = Holds(faults)
        self.hosts = HostRoots()
        self.parts = PartCommits(self.store, self._lock, self.commits, self.holds, self._retain)
        self.serving = FetchServing(
            self.store, self._lock, self.commits, self.retention, self.hosts, self._retain, faults
        )

    def attach(self, part_stores: list, curves=None) -> None:
        """Every host's part store (retention deletes on all of them), and the curves to mark publishes in."""
        self.hosts.attach(part_stores)  # asked while every host is up: a resume can name a host that is gone
        self.parts.curves = curves

    # -- the evaluations' holds ----------------------------------------------------------------------------------

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

    # -- the commit protocol (``PartCommits``) ---------------------------------------------------------------------

    def begin_attempt(self, attempt: int) -> None:
        self.parts.begin_attempt(attempt)

    def saved(self, attempt: int, name: str) -> Pick | None:
        return self.parts.saved(attempt, name)

    def pick(self) -> Pick | None:
        return self.parts.pick()

    @ray.method(concurrency_group=WORDS)
    def part_arrived(self, name: str, attempt: int, part: int, parts: int, manifest: dict, holder) -> None:
        self.parts.arrived(name, attempt, part, parts, manifest, holder)

    @ray.method(concurrency_group=WORDS)
    def part_failed(self, name: str, attempt: int, part: int, cause: str) -> None:
        self.parts.failed(name, attempt, part, cause)

    @ray.method(concurrency_group=WORDS)
    def part_placed(self, name: str, attempt: int, part: int, error: str | None) -> None:
        self.parts.placed(name, attempt, part, error)

    def another_attempt_stands(self, name: str, attempt: int) -> bool:
        with self._lock:
            return self.commits.another_attempt_stands(name, attempt)

    def publishing(self) -> bool:
        return self.parts.publishing()

    def outcome(self, name: str) -> tuple[bool, str | None]:
        return self.parts.outcome(name)

    def failures_by_name(self) -> dict[str, str]:
        return self.parts.failures_by_name()

    # -- a resume's fetches (``FetchServing``) -----------------------------------------------------------------------

    def newest_complete(self) -> str | None:
        return self.serving.newest_complete()

    def manifest(self, name: str) -> tuple[dict[str, dict], int]:
        return self.serving.manifest(name)

    def sources(self, name: str) -> dict[str, object]:
        return self.serving.sources(name)

    def read(self, name: str, relpath: str, offset: int) -> bytes:
        return self.serving.read(name, relpath, offset)

    def touch(self, name: str) -> None:
        self.serving.touch(name)

    def release(self, name: str, lease: int) -> None:
        self.serving.release(name, lease)

    def quarantine(self, name: str, reason: str) -> None:
        self.serving.quarantine(name, reason)

    # -- retention -------------------------------------------------------------------------------------------------

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
            self.hosts.delete_everywhere(name)  # every host's own files of it (a shared root: already gone)
            with self._lock:
                self.commits.holders.pop(name, None)
                self.retention.deleted(name)
            log.info("retention (keep %d): deleted checkpoint %s", self.retention.keep, name)

    def _in_use(self, name: str) -> bool:
        """Held, or (a step saved again) being placed anew: its record may be new."""
        return name in self.holds or name in self.commits.placing

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
            complete = self.serving.found_on_hosts(name, answered)[0]
        if complete and self.store.checks_content:
            self.commits.complete.add(name)
        return complete


def keeper_on_this_node(root: str, keep: int = 0, faults: Faults = NO_FAULTS):
    """A keeper pinned to the caller's node (the driver's)."""
    node_id = ray.get_runtime_context().get_node_id()
    return CheckpointKeeper.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    ).remote(root, keep, faults=faults)


def keeper_and_part_stores(
    root: str, keep: int, staging_dir: str, curves=None, faults: Faults = NO_FAULTS
) -> tuple[object, dict]:
    """The keeper of ``root`` on the caller's node, and a part store on every node (staging in ``staging_dir``):
    what training and the sharded-checkpoint test job both publish through."""
    keeper = keeper_on_this_node(root, keep, faults=faults)
    part_stores = part_stores_on_every_node(root, staging_dir, keeper, faults)
    # Bounded: the actors start on every node first (a process each), then the keeper asks each part store (60 s).
    ray.get(keeper.attach.remote(list(part_stores.values()), curves), timeout=ATTACH_S)
    return keeper, part_stores
