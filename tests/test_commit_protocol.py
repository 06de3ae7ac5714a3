"""The commit protocol of checkpoints that several hosts save a part of: the part set's decisions (arrival
orders, attempts, conflicting files, parts that never come, failures), then the keeper and real part stores,
each with its own root as each SageMaker host has its own /opt/ml/checkpoints."""

import itertools
import json
import shutil
import threading
import time
from pathlib import Path

import boto3
import pytest
import ray

from raycluster.checkpoints.commits import Commits
from raycluster.checkpoints.export import export_folder
from raycluster.checkpoints.keeper import CheckpointKeeper
from raycluster.checkpoints.manifest import MANIFEST, WRITTEN, manifest_of, problems
from raycluster.checkpoints.name_calls import NameCalls
from raycluster.checkpoints.part_store import PartStore
from raycluster.checkpoints.parts import Complete, GivenUp, Part, PartSet
from raycluster.checkpoints.placements import REMEMBERED_NAMES, Placements, Removal
from raycluster.checkpoints.store import LocalStore
from raycluster.checkpoints.transfer import fetch_directory
from raycluster.faults import NO_FAULTS, Faults
from raycluster.training.worker.shipping import outcome


def entry(size: int, digest: str = "d") -> dict:
    return {"size": size, WRITTEN: digest}


def part(number: int, files: dict | None = None) -> Part:
    return Part(number, files if files is not None else {f"shard/__{number}_0.distcp": entry(10 + number)})


def eventually(check, timeout: float = 10) -> None:
    """Fire-and-forget calls to other hosts land soon, in no set order: poll ``check`` until it holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never came to hold"
        time.sleep(0.1)


def answers(actor) -> bool:
    try:
        ray.get(actor.shared_root.remote(), timeout=10)
        return True
    except ray.exceptions.RayActorError:  # dead, or dying
        return False


def completes(decisions) -> list[Complete]:
    return [d for d in decisions if isinstance(d, Complete)]


def given_up(decisions) -> list[GivenUp]:
    return [d for d in decisions if isinstance(d, GivenUp)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_every_arrival_order_completes_once_with_every_parts_files(order):
    parts, decisions = PartSet(), []
    for n in order:
        decisions += parts.arrived("000100", 1, 3, part(n), now=0.0)
    (complete,) = completes(decisions)
    assert sorted(complete.parts) == [0, 1, 2]
    assert sorted(complete.manifest) == [f"shard/__{n}_0.distcp" for n in range(3)]
    assert given_up(decisions) == [] and parts.pending_names() == set()


def test_a_restart_never_combines_two_attempts_and_gives_up_the_older_ones_parts():
    # Host A's part of step 100 arrives, a worker fails while B's is in flight, the run resumes and saves 100 again.
    parts = PartSet()
    assert parts.arrived("000100", 1, 2, part(0), now=0.0) == []
    (abandoned,) = parts.begin_attempt(2)
    assert (abandoned.attempt, [p.part for p in abandoned.parts]) == (1, [0]) and "restart" in abandoned.reason
    late = parts.arrived("000100", 1, 2, part(1), now=1.0)  # attempt 1's B, in flight during the restart
    assert completes(late) == [] and [p.part for p in given_up(late)[0].parts] == [1]
    assert parts.arrived("000100", 2, 2, part(1), now=2.0) == []
    (complete,) = completes(parts.arrived("000100", 2, 2, part(0), now=3.0))
    assert complete.attempt == 2


def test_the_first_part_of_a_newer_attempt_is_a_restart_too():
    parts = PartSet()
    parts.arrived("000100", 1, 2, part(0), now=0.0)
    decisions = parts.arrived("000100", 2, 2, part(1), now=1.0)
    assert [(d.attempt, [p.part for p in d.parts]) for d in given_up(decisions)] == [(1, [0])]
    assert completes(decisions) == []


def test_parts_that_hold_one_file_differently_fail_the_checkpoint_and_are_all_removed():
    parts = PartSet()
    parts.arrived("000100", 1, 2, part(0, {"pretrained_model/config.json": entry(5, "a")}), now=0.0)
    (refused,) = parts.arrived("000100", 1, 2, part(1, {"pretrained_model/config.json": entry(5, "b")}), now=1.0)
    assert "different pretrained_model/config.json" in refused.reason and len(refused.parts) == 2


def test_the_same_file_with_the_same_bytes_on_two_hosts_is_one_file():
    parts = PartSet()
    same = {"pretrained_model/config.json": entry(5, "a")}
    parts.arrived("000100", 1, 2, part(0, dict(same)), now=0.0)
    (complete,) = completes(parts.arrived("000100", 1, 2, part(1, dict(same)), now=1.0))
    assert complete.manifest == same


def test_a_part_twice_or_a_count_that_disagrees_is_refused_and_a_repeated_word_is_ignored():
    parts = PartSet()
    parts.arrived("000100", 1, 3, part(0), now=0.0)
    assert parts.arrived("000100", 1, 3, part(0), now=0.5) == []  # the same word twice: a repeated message
    other = part(0, {"shard/__0_0.distcp": entry(99)})
    assert "twice" in given_up(parts.arrived("000100", 1, 3, other, now=1.0))[0].reason
    parts.arrived("000150", 1, 2, part(0), now=1.0)
    assert completes(parts.arrived("000150", 1, 2, part(1), now=1.0))
    assert parts.arrived("000150", 1, 2, part(1), now=2.0) == [] and parts.pending_names() == set()  # not reopened
    parts.arrived("000200", 1, 3, part(0), now=1.0)
    assert "has 3 parts" in given_up(parts.arrived("000200", 1, 4, part(1), now=2.0))[0].reason


def test_a_part_that_never_comes_is_given_up_at_its_deadline_or_when_a_newer_step_completes():
    parts = PartSet(deadline_s=60)
    parts.arrived("000100", 1, 2, part(0), now=0.0)
    assert parts.expired(now=59.0) == []
    (late,) = parts.expired(now=61.0)
    assert "parts [1] of 2 never arrived within 60 s" == late.reason
    parts.arrived("000200", 1, 2, part(1), now=100.0)  # host A skipped 200 (its queue held one)
    parts.arrived("000300", 1, 2, part(0), now=101.0)
    assert completes(parts.arrived("000300", 1, 2, part(1), now=102.0))
    (superseded,) = parts.superseded(300)
    assert superseded.name == "000200" and "before checkpoint 300" in superseded.reason


def test_a_failed_part_fails_its_checkpoint_before_and_after_the_others_arrive():
    parts = PartSet()
    parts.arrived("000100", 1, 2, part(0), now=0.0)
    (failed,) = parts.failed("000100", 1, 1, "disk full")
    assert failed.reason == "part 1 failed: disk full" and [p.part for p in failed.parts] == [0]
    parts.failed("000200", 1, 0, "disk full")  # failed first: a later part of it never completes anything
    (refused,) = parts.arrived("000200", 1, 2, part(1), now=1.0)
    assert refused.reason == "part 0 failed: disk full"


def test_parts_of_a_stale_attempt_that_arrive_after_the_restart_are_said_once_and_all_removed():
    # The restart came first, before any part of attempt 1's step 100: its set is given up at its first part
    # (said, so that the step is decided), and each later part is removed without another word.
    parts = PartSet()
    parts.begin_attempt(2)
    (first,) = parts.arrived("000100", 1, 3, part(0), now=0.0)
    assert not first.late and first.reason == "part 0 of attempt 1: stale" and [p.part for p in first.parts] == [0]
    later = [parts.arrived("000100", 1, 3, part(n), now=1.0) for n in (1, 2)]
    assert [(d.late, [p.part for p in d.parts]) for (d,) in later] == [(True, [1]), (True, [2])]
    assert parts.pending_names() == set()


def test_an_older_attempts_failure_of_a_step_never_decides_the_newer_attempts_outcome_of_it():
    # Attempt 1's step 100 is abandoned by the restart; attempt 2 saves step 100 again, and rank 0 asks for its
    # outcome once its own part is in: the answer is attempt 2's, never attempt 1's failure.
    commits = Commits()
    commits.arrived("000100", 1, part(0), 2, now=0.0)
    commits.begin_attempt(2, now=1.0)
    assert commits.outcome("000100", now=1.0)[0] == (True, "abandoned by a restart")
    commits.failed("000100", 1, 1, "its part store died", now=1.5)  # attempt 1's other host, late: said once
    assert commits.failed("000100", 1, 1, "its part store died", now=1.6) == []
    commits.arrived("000100", 2, part(0), 2, now=2.0)
    assert commits.outcome("000100", now=2.0)[0] == (False, None)  # pending: attempt 2's other part is to come
    commits.failed("000100", 1, 1, "told again, after the restart", now=2.5)
    assert commits.outcome("000100", now=2.5)[0] == (False, None)


def test_a_removal_with_no_word_of_its_place_spares_a_part_the_keeper_says_another_attempt_placed_or_committed():
    commits = Commits()
    assert not commits.another_attempt_stands("000100", 1)  # nothing of the step here: the removal goes on
    commits.begin_attempt(2, now=0.0)
    commits.arrived("000100", 2, part(0), 2, now=1.0)
    commits.arrived("000100", 2, part(1), 2, now=1.5)  # attempt 2's parts, being placed
    assert commits.another_attempt_stands("000100", 1) and not commits.another_attempt_stands("000100", 2)
    commits.placed("000100", 2, 0, None, now=2.0)
    commits.placed("000100", 2, 1, None, now=2.5)
    commits.recorded("000100", 2, None, now=3.0)
    assert "000100" not in commits.placing and commits.another_attempt_stands("000100", 1)  # committed


def test_a_set_given_up_is_never_reopened_by_a_late_part():
    parts = PartSet(deadline_s=60)
    parts.arrived("000100", 1, 2, part(0), now=0.0)
    parts.expired(now=61.0)
    (late,) = parts.arrived("000100", 1, 2, part(1), now=62.0)  # the slow host's part, after the deadline
    assert "never arrived within 60 s" in late.reason and parts.pending_names() == set()


def test_a_stale_attempts_failure_does_not_fail_the_new_attempts_checkpoint():
    parts = PartSet()
    parts.begin_attempt(2)
    parts.failed("000100", 1, 1, "its source was moved aside")  # attempt 1's part store, still staging
    parts.arrived("000100", 2, 2, part(0), now=0.0)
    assert completes(parts.arrived("000100", 2, 2, part(1), now=1.0))


# -- the keeper and real part stores, one root per host --------------------------------------------------


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    ray.init(num_cpus=1, include_dashboard=False)
    yield
    ray.shutdown()


class Hosts:
    """A keeper on algo-1's root and one part store per host, each with its own root and staging."""

    def __init__(self, tmp_path, count: int, keep: int = 0, part_deadline_s: float = 300, faults: Faults = NO_FAULTS,
                 place_deadline_s: float = 300):  # fmt: skip
        self.roots = [tmp_path / f"algo-{n + 1}" / "checkpoints" for n in range(count)]
        self.keeper = CheckpointKeeper.remote(
            str(self.roots[0]), keep, part_deadline_s=part_deadline_s, faults=faults, place_deadline_s=place_deadline_s
        )
        self.stores = [
            PartStore.remote(str(r), str(r.parent / "staging"), self.keeper, faults, turn_s=place_deadline_s)
            for r in self.roots
        ]
        ray.get(self.keeper.attach.remote(self.stores))

    def save(self, tmp_path, name: str, attempt: int, hosts=None, payload: bytes = b"") -> list:
        """Each host's part of ``name`` as its ranks would write it, staged by its part store (all at once)."""
        calls = []
        for n in hosts if hosts is not None else range(len(self.stores)):
            source = tmp_path / f"save-a{attempt}-h{n}" / name
            shards = source / "pretrained_model" / "pytorch_model_fsdp_0"
            shards.mkdir(parents=True)
            (shards / f"__{n}_0.distcp").write_bytes(payload or f"attempt {attempt} host {n}".encode())
            if n == 0:
                (source / "pretrained_model" / "config.json").write_text("{}")
            calls.append(self.stores[n].stage.remote(name, attempt, n, len(self.stores), str(source)))
        return calls

    def record(self, name: str) -> dict:
        return json.loads((self.roots[0] / "checkpoints" / name / MANIFEST).read_text())


@pytest.mark.cluster  # a local Ray of this module's
def test_more_hosts_than_keeper_threads_publish_in_parallel_each_into_its_own_root(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 6)  # the keeper has 4 threads: a funnel that waits per host stalled from 5 on
    ray.get(hosts.save(tmp_path, "000001", 1))
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    record = hosts.record("000001")
    assert {e["attempt"] for e in record.values()} == {1} and len(record) == 7
    for n, root in enumerate(hosts.roots):  # every host holds its own shard, and no other's
        held = {p.name for p in (root / "checkpoints" / "000001").rglob("*.distcp")}
        assert held == {f"__{n}_0.distcp"}
    target = tmp_path / "fetched" / "000001"  # a resume on algo-3 gathers every part
    assert fetch_directory(hosts.keeper, "000001", target, hosts.stores[2])
    assert problems(target, record) is None
    assert ray.get(hosts.keeper.complete_names.remote()) == ["000001"]


@pytest.mark.cluster  # a local Ray of this module's
def test_a_part_store_that_dies_is_started_again_and_the_next_checkpoint_commits_with_every_part(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 3)
    ray.get(hosts.save(tmp_path, "000001", 1))
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    staging = hosts.roots[2].parent / "staging"
    before = set(staging.glob("raycluster-parts-*"))
    ray.kill(hosts.stores[2], no_restart=False)  # its process dies, its node lives (killed by the OOM killer, say)
    # Started again: it answers, from a staging of its own, and the dead one's is gone.
    eventually(lambda: answers(hosts.stores[2]) and set(staging.glob("raycluster-parts-*")).isdisjoint(before), 60)
    ray.get(hosts.save(tmp_path, "000002", 1))
    assert outcome(hosts.keeper, "000002", deadline_s=30) is None  # not failed on algo-3's part, as every later one was
    for name in ("000001", "000002"):  # both resume whole: algo-3's root kept what it placed before it died
        target = tmp_path / "fetched" / name
        assert fetch_directory(hosts.keeper, name, target, hosts.stores[0])
        assert problems(target, hosts.record(name)) is None
    assert len(list(staging.glob("raycluster-parts-*"))) == 1


@pytest.mark.cluster  # a local Ray of this module's
def test_a_place_cut_off_by_its_part_stores_death_fails_its_checkpoint_at_once_not_at_the_place_deadline(
    local_ray, tmp_path
):
    hosts = Hosts(tmp_path, 3, faults=Faults(publish_delay_s=5))  # every place takes 5 s: the death comes mid-place
    ray.get(hosts.save(tmp_path, "000001", 1))
    eventually(lambda: ray.get(hosts.keeper.publishing.remote()), 30)
    ray.kill(hosts.stores[2], no_restart=False)  # algo-3's place dies with its process; Ray starts the store again
    why = outcome(hosts.keeper, "000001", deadline_s=60)  # the place deadline is 300 s; every later commit waits
    died = "not placed: this part store holds no staged copy of it (started again since it staged it)"
    assert why == f"part 2 could not be placed: RuntimeError: {died}", why
    # Nothing of it stays on any host, the store started again included (its removal went there too).
    eventually(lambda: not any((root / "checkpoints" / "000001").exists() for root in hosts.roots), 30)
    ray.get(hosts.save(tmp_path, "000002", 1))
    assert outcome(hosts.keeper, "000002", deadline_s=60) is None


@ray.remote(num_cpus=0, max_concurrency=4)
class GatedKeeper:
    """Takes a part store's word of a staged part as the keeper does, each only once ``gate`` exists (a keeper
    whose word threads are busy), and says how many words wait at the gate."""

    def __init__(self, gate: str):
        self.gate, self.words, self.at_gate = Path(gate), [], 0

    def part_arrived(self, name: str, attempt: int, part: int, parts: int, manifest: dict, holder) -> None:
        self.at_gate += 1
        while not self.gate.exists():
            time.sleep(0.05)
        self.words.append((name, attempt, part))

    def waiting(self) -> int:
        return self.at_gate

    def heard(self) -> list:
        return self.words


@pytest.mark.cluster  # a local Ray of this module's
def test_a_stage_returns_once_the_keeper_took_its_word_so_a_death_before_that_says_it_again(local_ray, tmp_path):
    """A word a part store sent and did not wait for died with its process once, after its stage had returned:
    Ray ran nothing again, and the keeper waited out its 300 s part deadline (a run of the 8-host sim test)."""
    gate, root = tmp_path / "gate", tmp_path / "algo-1" / "checkpoints"
    keeper = GatedKeeper.remote(str(gate))
    store = PartStore.remote(str(root), str(root.parent / "staging"), keeper)
    source = tmp_path / "save" / "000001"
    source.mkdir(parents=True)
    (source / "model.safetensors").write_bytes(b"weights")
    staging = store.stage.remote("000001", 1, 0, 1, str(source))
    eventually(lambda: ray.get(keeper.waiting.remote()) == 1, 30)  # staged, its word at the keeper's gate
    assert not ray.wait([staging], timeout=2)[0]  # and the stage has not returned
    ray.kill(store, no_restart=False)  # its process dies before its word was taken; Ray starts it again
    eventually(lambda: ray.get(keeper.waiting.remote()) == 2, 60)  # the stage run again says it anew
    gate.touch()
    assert ray.get(staging, timeout=60) == len(b"weights")
    eventually(lambda: ray.get(keeper.heard.remote()) == [("000001", 1, 0)] * 2, 10)  # the dead one's word too


@pytest.mark.cluster  # a local Ray of this module's
def test_a_stage_ray_runs_again_after_a_place_of_it_found_nothing_stages_nothing(local_ray, tmp_path):
    """A place and a stage both cut off by a death reach the store started again in no set order: a place that
    came first fails the checkpoint, and a copy staged after it would stay in staging for the rest of the run."""
    hosts = Hosts(tmp_path, 1)
    ray.get(hosts.stores[0].place.remote("000001", 1, 0, {}, None), timeout=30)  # no staged copy: refused
    assert ray.get(hosts.save(tmp_path, "000001", 1), timeout=30) == [0]
    assert not list((hosts.roots[0].parent / "staging").glob("raycluster-parts-*/000001*"))


@pytest.mark.cluster  # a local Ray of this module's
def test_a_removal_that_gives_up_waiting_behind_a_late_place_of_its_part_still_leaves_nothing_of_it(
    local_ray, tmp_path
):
    """A placement fails at its deadline because a place is late, and that place holds the checkpoint's turn that
    the removal waits for: a place later than the removal's own wait for its turn once left its part in the root
    for good (no record names it; SageMaker uploads it). The place now takes back what it wrote."""
    hosts = Hosts(tmp_path, 2, faults=Faults(publish_delay_s=6), place_deadline_s=2)  # every place takes 6 s
    ray.get(hosts.save(tmp_path, "000001", 1))
    why = outcome(hosts.keeper, "000001", deadline_s=30)  # failed at 2 s; each removal gives up its wait at 4 s
    assert why == "parts [0, 1] not placed within 2 s", why
    # The places end at 6 s: nothing of the checkpoint stays on either host, nor in staging.
    parts = [root / "checkpoints" / "000001" for root in hosts.roots]
    eventually(lambda: not any(p.exists() for p in parts) and not list(tmp_path.glob("algo-*/staging/*/*")), 30)
    time.sleep(1)  # and nothing comes back after
    assert not any(p.exists() for p in parts)


@pytest.mark.cluster  # a local Ray of this module's
def test_a_removal_that_reaches_a_part_store_started_again_spares_another_attempts_committed_part_on_every_host(
    local_ray, tmp_path
):
    """The keeper's host reads the commit record in its root; the other host's root holds none, and its part store
    asks the keeper."""
    hosts = Hosts(tmp_path, 2)
    ray.get(hosts.save(tmp_path, "000001", 2))  # attempt 2's checkpoint, committed
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    for store in hosts.stores:  # started again, with no memory of what they placed
        ray.kill(store, no_restart=False)
    eventually(lambda: all(answers(store) for store in hosts.stores), 60)
    # Attempt 1's failed placement of the same step, its removal late (Ray took it to the store started again).
    for n, store in enumerate(hosts.stores):
        ray.get(
            store.delete.remote("000001", 1, (f"pretrained_model/pytorch_model_fsdp_0/__{n}_0.distcp",)), timeout=90
        )
    kept = [root / "checkpoints" / "000001" for root in hosts.roots]
    assert hosts.record("000001") and all(list(k.rglob("__*_0.distcp")) for k in kept)  # the record and both shards
    ray.get(hosts.stores[1].delete.remote("000001"), timeout=30)  # retention still removes it
    assert not kept[1].exists()


@pytest.mark.cluster  # a local Ray of this module's
def test_a_part_of_an_abandoned_attempt_is_never_combined_and_is_removed(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 2)
    ray.get(hosts.save(tmp_path, "000002", 1, hosts=[0]))
    ray.get(hosts.keeper.begin_attempt.remote(2))  # the worker group restarted while host 2's part was in flight
    ray.get(hosts.save(tmp_path, "000002", 1, hosts=[1]))  # ... which arrives now
    why = outcome(hosts.keeper, "000002", deadline_s=5)  # nothing of attempt 1 is published: given up, as decided
    assert why == "abandoned by a restart" or why.endswith("of attempt 1: stale"), why  # by the arrival order
    assert ray.get(hosts.keeper.complete_names.remote()) == []
    ray.get(hosts.save(tmp_path, "000002", 2))
    assert outcome(hosts.keeper, "000002", deadline_s=30) is None
    assert {e["attempt"] for e in hosts.record("000002").values()} == {2}
    for n, root in enumerate(hosts.roots):
        assert (root / "checkpoints" / "000002" / "pretrained_model" / "pytorch_model_fsdp_0" / f"__{n}_0.distcp")\
            .read_text() == f"attempt 2 host {n}"  # fmt: skip
        eventually(lambda root=root: list((root.parent / "staging").glob("*/*")) == [])  # no staged part left


@pytest.mark.cluster  # a local Ray of this module's
def test_a_part_that_cannot_be_placed_fails_the_checkpoint_with_its_cause(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 3)
    ray.get(hosts.save(tmp_path, "000001", 1))
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    (hosts.roots[2] / "checkpoints" / "000003").write_text("in the way")  # host 3 cannot make the directory
    ray.get(hosts.save(tmp_path, "000003", 1))
    why = outcome(hosts.keeper, "000003", deadline_s=30)
    assert "part 2 could not be placed" in why
    assert ray.get(hosts.keeper.failures_by_name.remote()) == {"000003": why}
    assert ray.get(hosts.keeper.complete_names.remote()) == ["000001"]  # the newest complete one stands
    # Placed on hosts 1 and 2, then removed from both (host 3's 000003 is the test's own blocking file).
    eventually(lambda: all(not (root / "checkpoints" / "000003").exists() for root in hosts.roots[:2]))


@pytest.mark.cluster  # a local Ray of this module's
def test_a_part_that_never_comes_fails_its_checkpoint_at_the_deadline_and_the_next_is_published(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 2, part_deadline_s=2)
    ray.get(hosts.save(tmp_path, "000001", 1, hosts=[0]))  # host 2 was lost mid-save
    assert "parts [1] of 2 never arrived within 2 s" in outcome(hosts.keeper, "000001", deadline_s=10)
    ray.get(hosts.save(tmp_path, "000002", 1))
    assert outcome(hosts.keeper, "000002", deadline_s=30) is None
    assert ray.get(hosts.keeper.complete_names.remote()) == ["000002"]


@pytest.mark.cluster  # a local Ray of this module's
def test_a_part_deadline_counts_from_when_the_hosts_word_came_not_from_when_a_busy_keeper_got_to_it(
    local_ray, tmp_path
):
    # Every thread the keeper has for its other calls is busy for 6 s (four resume checks held by the fault seam,
    # as resumes hashing a restored checkpoint would hold them).
    hosts = Hosts(tmp_path, 2, part_deadline_s=2, faults=Faults(resume_check_s=6))
    ray.get(hosts.save(tmp_path, "000001", 1, hosts=[0]))
    busy = [hosts.keeper.newest_complete.remote() for _ in range(4)]
    time.sleep(0.5)
    ray.get(hosts.save(tmp_path, "000001", 1, hosts=[1]))  # within 2 s of the first part's word; handled at once
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    assert len(ray.get(busy)) == 4
    assert {e["part"] for e in hosts.record("000001").values()} == {0, 1}


@pytest.mark.cluster  # a local Ray of this module's
def test_retention_deletes_a_checkpoint_on_every_host_and_its_commit_record_first(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 3, keep=2)
    for step in (1, 2, 3):
        ray.get(hosts.save(tmp_path, f"{step:06d}", 1))
        assert outcome(hosts.keeper, f"{step:06d}", deadline_s=30) is None
    assert ray.get(hosts.keeper.complete_names.remote()) == ["000002", "000003"]
    for root in hosts.roots:
        eventually(lambda root=root: sorted(p.name for p in (root / "checkpoints").iterdir()) == ["000002", "000003"])


@pytest.mark.cluster  # a local Ray of this module's
def test_the_model_exported_from_a_checkpoint_spread_over_hosts_carries_every_hosts_shards(local_ray, tmp_path):
    # safetensors_dcp with a model dir: each host's root holds only its own shards; the model dir (on algo-1, the
    # driver's) must get the whole pretrained_model, read back from every host, and nothing else of the checkpoint.
    hosts = Hosts(tmp_path, 3)
    for name, payload in (("000001", b"first"), ("000002", b"second")):
        ray.get(hosts.save(tmp_path, name, 1, payload=payload))
        assert outcome(hosts.keeper, name, deadline_s=30) is None
    model_dir = tmp_path / "algo-1" / "model"
    scratch = str(tmp_path / "algo-1" / "staging")
    export_folder(hosts.keeper, "000001", "pretrained_model", str(model_dir), scratch, hosts.stores[0])
    exported = export_folder(hosts.keeper, "000002", "pretrained_model", str(model_dir), scratch, hosts.stores[0])
    assert exported == model_dir / "pretrained_model"
    shards = sorted(p.name for p in (exported / "pytorch_model_fsdp_0").iterdir())
    assert shards == ["__0_0.distcp", "__1_0.distcp", "__2_0.distcp"]
    assert (exported / "pytorch_model_fsdp_0" / "__2_0.distcp").read_text() == "second"  # the newer replaced
    assert LocalStore(model_dir).problems("pretrained_model") is None  # a record of its own, every file in it
    assert sorted(p.name for p in model_dir.iterdir()) == ["pretrained_model"]  # the one replaced, no scratch left
    assert [p for p in Path(scratch).rglob("*") if p.is_file()] == []


@pytest.mark.cluster  # a local Ray of this module's
def test_a_fetched_part_that_is_not_what_the_record_says_is_quarantined(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 2)
    ray.get(hosts.save(tmp_path, "000001", 1))
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    shard = hosts.roots[1] / "checkpoints" / "000001" / "pretrained_model" / "pytorch_model_fsdp_0" / "__1_0.distcp"
    shard.write_text("attempt 1 host X")  # the same size, other bytes
    with pytest.raises(RuntimeError, match="not what its manifest says"):
        fetch_directory(hosts.keeper, "000001", tmp_path / "fetched" / "000001", hosts.stores[0])
    assert ray.get(hosts.keeper.newest_complete.remote()) is None
    assert LocalStore(hosts.roots[0] / "checkpoints").names() == []
    aside = list((hosts.roots[0] / "quarantine").iterdir())  # moved aside, not deleted
    assert [p.name[:6] for p in aside] == ["000001"] and (aside[0] / MANIFEST).is_file()
    eventually(lambda: not (hosts.roots[1] / "checkpoints" / "000001").exists())  # and no other host keeps its part
    shutil.rmtree(tmp_path / "fetched", ignore_errors=True)


@pytest.mark.cluster  # a local Ray of this module's
def test_a_resume_names_the_host_whose_part_store_is_gone_and_takes_the_newest_checkpoint_within_reach(
    local_ray, tmp_path
):
    hosts = Hosts(tmp_path, 3)
    whole = tmp_path / "whole" / "000001" / "pretrained_model"
    whole.mkdir(parents=True)
    (whole / "config.json").write_text("{}")
    ray.get(hosts.stores[0].stage.remote("000001", 1, 0, 1, str(whole.parent)))  # one part, on algo-1 alone
    assert outcome(hosts.keeper, "000001", deadline_s=30) is None
    ray.get(hosts.save(tmp_path, "000002", 1))
    assert outcome(hosts.keeper, "000002", deadline_s=30) is None
    ray.kill(hosts.stores[2], no_restart=True)  # host 3's part store dies; its files stay on its disk
    assert ray.get(hosts.keeper.newest_complete.remote()) == "000001"  # 000002's part 2 is out of reach
    assert LocalStore(hosts.roots[0] / "checkpoints").names() == ["000001", "000002"]  # passed over, not moved aside
    # Nothing within reach: the resume fails naming the host, never starts from scratch.
    only_parts = Hosts(tmp_path / "parts", 2)
    ray.get(only_parts.save(tmp_path / "parts", "000003", 1))
    assert outcome(only_parts.keeper, "000003", deadline_s=30) is None
    ray.kill(only_parts.stores[1], no_restart=True)
    address = ray.nodes()[0]["NodeManagerAddress"]
    with pytest.raises(
        ray.exceptions.RayTaskError, match=f"checkpoint 000003 has parts on {address} .*no longer answer"
    ):
        ray.get(only_parts.keeper.newest_complete.remote())


@pytest.mark.cluster  # a local Ray of this module's
def test_a_second_run_on_node_local_roots_resumes_from_the_newest_sharded_checkpoint(local_ray, tmp_path):
    # A cluster kept up (or a local multi-node one) runs again: its new keeper finds the record in its own root
    # and each host's part in that host's root, and takes it, instead of moving it aside as incomplete.
    first = Hosts(tmp_path, 3)
    for name in ("000002", "000004"):
        ray.get(first.save(tmp_path, name, 1))
        assert outcome(first.keeper, name, deadline_s=30) is None
    second = Hosts(tmp_path, 3)  # the same roots
    assert ray.get(second.keeper.newest_complete.remote()) == "000004"
    # The older one counts as complete too (retention keeps or deletes it by the same rule as the newest).
    assert ray.get(second.keeper.complete_names.remote()) == ["000002", "000004"]
    assert fetch_directory(second.keeper, "000004", tmp_path / "resumed" / "000004", second.stores[0])
    assert problems(tmp_path / "resumed" / "000004", first.record("000004")) is None
    assert not (first.roots[0] / "quarantine").exists()


@pytest.mark.cluster  # a local Ray of this module's
def test_a_resume_moves_aside_the_parts_of_an_older_step_that_never_committed_on_every_host(local_ray, tmp_path):
    # Step 2's parts were placed on two hosts, and its third host's place died with its part store: no record.
    first = Hosts(tmp_path, 3)
    for name in ("000001", "000003"):
        ray.get(first.save(tmp_path, name, 1))
        assert outcome(first.keeper, name, deadline_s=30) is None
    for n in (0, 1):
        orphan = first.roots[n] / "checkpoints" / "000002" / "pretrained_model" / "pytorch_model_fsdp_0"
        orphan.mkdir(parents=True)
        (orphan / f"__{n}_0.distcp").write_bytes(b"never committed")
    second = Hosts(tmp_path, 3)  # the next run, on the same roots
    assert ray.get(second.keeper.newest_complete.remote()) == "000003"
    # Retention goes by records and would never take it: moved aside at the keeper's root, removed on the others.
    eventually(lambda: not any((root / "checkpoints" / "000002").exists() for root in first.roots))
    assert [p.name[:6] for p in (first.roots[0] / "quarantine").iterdir()] == ["000002"]
    assert all((root / "checkpoints" / "000001").is_dir() for root in first.roots)  # a committed one stays


@pytest.mark.cluster  # a local Ray of this module's
def test_a_late_removal_or_place_spares_a_newer_attempts_part_and_a_given_up_place_writes_nothing(local_ray, tmp_path):
    hosts = Hosts(tmp_path, 2)
    ray.get(hosts.save(tmp_path, "000005", 2))
    assert outcome(hosts.keeper, "000005", deadline_s=30) is None
    part = hosts.roots[1] / "checkpoints" / "000005" / "pretrained_model" / "pytorch_model_fsdp_0" / "__1_0.distcp"
    ray.get(hosts.stores[1].delete.remote("000005", 1))  # attempt 1's failed placement, its word arriving late
    assert part.read_text() == "attempt 2 host 1"
    # Attempt 1's own place of it, which outlasted its deadline, ends now: it writes nothing.
    late = staged_by_hand(hosts.roots[1].parent / "staging", 1, "000005", 1)
    ray.get(hosts.stores[1].place.remote("000005", 1, 1, manifest_of(late), None))
    assert part.read_text() == "attempt 2 host 1" and not late.exists()
    # A removal that reaches the part store before its own place: the place, when it comes, leaves nothing.
    ray.get(hosts.stores[1].delete.remote("000007", 1))
    late = staged_by_hand(hosts.roots[1].parent / "staging", 1, "000007", 1)
    ray.get(hosts.stores[1].place.remote("000007", 1, 1, manifest_of(late), None))
    assert not (hosts.roots[1] / "checkpoints" / "000007").exists() and not late.exists()
    ray.get(hosts.stores[1].delete.remote("000005"))  # retention: every attempt's
    assert not part.exists()


@pytest.mark.cluster  # a local Ray of this module's
def test_on_a_root_every_host_shares_a_failed_placements_removal_takes_that_hosts_files_alone(
    local_ray, s3_endpoint, tmp_path
):
    """An S3 root: host 0 has placed attempt 2's part of a step while host 1's place of attempt 1's part ended late,
    and that placement's removal reaches host 1: host 0's files stay. So they do where host 1's part store has no
    word of that place: its removal came before the place, or the place came to a process that died since (Ray
    runs the removal on the store started again); then it takes the files the keeper says that place writes."""
    on_s3 = {"runtime_env": {"env_vars": s3_endpoint}}
    keeper = CheckpointKeeper.options(**on_s3).remote("s3://ckpts/shared")
    stores = [PartStore.options(**on_s3).remote("s3://ckpts/shared", str(tmp_path / f"s{n}"), keeper) for n in (0, 1)]
    ray.get([store.node_id.remote() for store in stores])  # each has made its staging folder
    host1_files = ("pretrained_model/pytorch_model_fsdp_0/__1_0.distcp",)
    for host, attempt in ((0, 2), (1, 1)):
        staged = staged_by_hand(tmp_path / f"s{host}", host, "000003", attempt)
        ray.get(stores[host].place.remote("000003", attempt, host, manifest_of(staged), None))
    ray.get(stores[1].delete.remote("000003", 1, host1_files))
    assert s3_files("shared/checkpoints/000003/") == ["__0_0.distcp"]
    # Attempt 1's place, by a part store that then died: the one started in its stead has no word of it.
    staged = staged_by_hand(tmp_path / "s1", 1, "000004", 1)
    ray.get(stores[1].place.remote("000004", 1, 1, manifest_of(staged), None))
    staged = staged_by_hand(tmp_path / "s0", 0, "000004", 2)
    ray.get(stores[0].place.remote("000004", 2, 0, manifest_of(staged), None))
    started_again = PartStore.options(**on_s3).remote("s3://ckpts/shared", str(tmp_path / "s1-again"), keeper)
    ray.get(started_again.delete.remote("000004", 1, host1_files))
    assert s3_files("shared/checkpoints/000004/") == ["__0_0.distcp"]
    # A removal that reaches host 1 before attempt 1's place does: host 0's newer part stays all the same.
    staged = staged_by_hand(tmp_path / "s0", 0, "000005", 2)
    ray.get(stores[0].place.remote("000005", 2, 0, manifest_of(staged), None))
    ray.get(stores[1].delete.remote("000005", 1, host1_files))
    assert s3_files("shared/checkpoints/000005/") == ["__0_0.distcp"]


def s3_files(prefix: str) -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket="ckpts", Prefix=prefix)
    return [o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", [])]


def staged_by_hand(staging_dir: Path, host: int, name: str, attempt: int) -> Path:
    """A part as the part store stages it (in its own staging folder), written here, and not announced: the files
    of a place that the keeper asked for long ago."""
    [staging] = staging_dir.glob("raycluster-parts-*")
    staged = staging / f"{name}.attempt{attempt}.part{host}" / "pretrained_model" / "pytorch_model_fsdp_0"
    staged.mkdir(parents=True)
    (staged / f"__{host}_0.distcp").write_text(f"attempt {attempt} host {host}")
    return staged.parent.parent


def test_a_late_place_or_removal_never_touches_a_newer_attempts_part():
    placements = Placements()
    assert placements.may_place("000004", 2) is None
    placements.placing("000004", 2, ["shard/__1_0.distcp"])
    assert placements.may_place("000004", 1) == "attempt 2's part of it is in place already"
    assert placements.removal("000004", 1) is None  # attempt 1's failed placement, its word late
    files = ("shard/__1_0.distcp",)  # nothing known of it here: the keeper's word of its files stands
    assert placements.removal("000006", 1, files) == Removal(files, unheard=True)
    assert placements.may_place("000006", 1) == "attempt 1's part was given up before it could be placed"
    # A failed placement of this host's part: its own files go (on a root every host shares, nothing else).
    placements.placing("000008", 3, ["shard/__1_0.distcp"])
    assert placements.removal("000008", 3) == Removal(("shard/__1_0.distcp",))
    assert placements.removal("000004", None) == Removal(None) and placements.may_place("000004", 3) is None


def test_a_place_whose_removal_came_while_it_was_written_takes_back_its_own_files_and_its_removal_then_none():
    placements = Placements()
    placements.placing("000003", 1, ["shard/__1_0.distcp"])
    assert placements.written("000003", 1) is None  # no removal came: it stays
    placements.placing("000004", 1, ["shard/__1_0.distcp"])
    placements.give_up("000004", 1)  # its removal, before it waits for its turn behind this place
    assert placements.written("000004", 1) == Removal(("shard/__1_0.distcp",))  # to take back
    placements.placing("000005", 1, ["shard/__1_0.distcp"])  # a take-back that failed: its removal still knows
    placements.give_up("000005", 1)
    assert placements.written("000005", 1) == Removal(("shard/__1_0.distcp",))
    assert placements.removal("000005", 1) == Removal(("shard/__1_0.distcp",))
    placements.taken_back("000004", 1)  # taken back by the place
    # The removal's turn comes: this host's files of it, none (never every host's, on a root they all share).
    assert placements.removal("000004", 1) == Removal(())
    assert placements.may_place("000004", 1) == "attempt 1's part was given up before it could be placed"


def test_a_part_store_remembers_its_placements_for_thousands_of_checkpoints_and_no_more():
    placements = Placements()
    for step in range(REMEMBERED_NAMES + 10):
        placements.placing(f"{step:06d}", 2, [])
    assert placements.may_place(f"{10:06d}", 1) == "attempt 2's part of it is in place already"
    assert placements.may_place(f"{9:06d}", 1) is None  # forgotten: bounded, whatever the run's length


def test_calls_on_one_checkpoint_take_turns_beside_other_checkpoints_and_a_wait_past_its_bound_fails():
    calls, entered, release = NameCalls(), threading.Event(), threading.Event()

    def place_stalled_on_its_disk() -> None:
        with calls.one_at_a_time("000001", 5):
            entered.set()
            release.wait(5)

    stalled = threading.Thread(target=place_stalled_on_its_disk)
    stalled.start()
    assert entered.wait(5)
    with calls.one_at_a_time("000002", 0.1):  # another checkpoint's call goes on beside it
        pass
    with pytest.raises(TimeoutError, match="checkpoint 000001 took longer than 0 s"):
        with calls.one_at_a_time("000001", 0.2):
            pass
    release.set()
    stalled.join()
    with calls.one_at_a_time("000001", 0.1):  # its turn again, once the stalled one is done
        pass
    assert calls._turns == {}  # nothing kept of a checkpoint no call holds or waits for
