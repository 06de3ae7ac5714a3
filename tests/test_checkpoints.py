"""The checkpoint keeper: complete-only publishing, verification, quarantine, retention, S3."""

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
import ray

from conftest import COMMON as SHARED
from conftest import REPO, TINY_ACT, dataset_flags, dead_pid, pick, recorded_rows, run_cli
from published import OneHost
from raycluster.checkpoints.keeper import CheckpointKeeper
from raycluster.checkpoints.manifest import MANIFEST, manifest_of, problems
from raycluster.checkpoints.s3_store import S3Store
from raycluster.checkpoints.scratch import owned_suffix, remove_orphans
from raycluster.checkpoints.store import LocalStore
from raycluster.checkpoints.transfer import fetch_directory
from raycluster.training.phases import RECOVERY
from raycluster.training.summary import read_summary
from raycluster.training.worker.resume import resume_source


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    # Keepers made here without a staging dir stage in their process's temp dir: keep that out of /tmp.
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        runtime_env={"env_vars": {"TMPDIR": str(tmp_path_factory.mktemp("actor-tmp"))}},
    )
    yield
    ray.shutdown()


def steps(keeper) -> list[int]:
    """The keeper's complete checkpoints, as steps."""
    return [int(name) for name in ray.get(keeper.complete_names.remote())]


def fake_checkpoint(path, payload=b"x" * 3_000_000):
    (path / "pretrained_model").mkdir(parents=True)
    (path / "training_state").mkdir()
    (path / "pretrained_model" / "model.safetensors").write_bytes(payload)
    (path / "training_state" / "training_step.json").write_text('{"step": 1}')
    return path


@pytest.mark.cluster  # a local Ray of this module's
def test_published_checkpoints_are_whole_and_bad_ones_are_moved_aside(local_ray, tmp_path):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging")
    for step in ("000002", "000004", "000006"):
        host.publish(fake_checkpoint(tmp_path / "src" / step), step)
    root = tmp_path / "root" / "checkpoints"
    assert (
        json.loads((root / "000006" / MANIFEST).read_text())["pretrained_model/model.safetensors"]["size"] == 3_000_000
    )
    # A truncated newest checkpoint, and a SageMaker sync leftover in the one before.
    with (root / "000006" / "pretrained_model" / "model.safetensors").open("r+b") as f:
        f.truncate(1000)
    (root / "000004" / "pretrained_model" / "model.safetensors.sagemaker-uploading").write_bytes(b"")
    keeper = CheckpointKeeper.remote(str(tmp_path / "root"))  # a restarted job's: it checks what it did not commit
    assert ray.get(keeper.newest_complete.remote()) == "000002"
    assert LocalStore(root).names() == ["000002"]
    aside = sorted(p.name for p in (tmp_path / "root" / "quarantine").iterdir())
    assert [name[:6] for name in aside] == ["000004", "000006"]  # moved, not deleted
    # A node that lacks the files gets them back from the keeper, byte for byte.
    target = tmp_path / "node2" / "000002"
    assert fetch_directory(keeper, "000002", target)
    assert (target / "pretrained_model" / "model.safetensors").read_bytes() == b"x" * 3_000_000
    assert not fetch_directory(keeper, "000002", target)  # already there and intact


@pytest.mark.cluster  # a local Ray of this module's
def test_a_staging_dir_beside_the_root_puts_each_checkpoint_in_place_by_one_rename(local_ray, tmp_path):
    # SageMaker uploads whatever appears under /opt/ml/checkpoints: nothing partial, nothing hidden may appear there.
    host = OneHost(str(tmp_path / "synced" / "lerobot"), tmp_path / "staging")
    root = tmp_path / "synced" / "lerobot" / "checkpoints"
    seen, publishing = [], True

    def watch():  # what SageMaker's sync would see, polled while the checkpoints are published
        while publishing:
            for entry in list(root.iterdir()) if root.is_dir() else []:
                # An entry renamed away between the listing and the look is not a partial one: look again.
                whole = (entry / MANIFEST).exists() or not entry.exists() or (entry / MANIFEST).exists()
                seen.append((entry.name, whole))

    with ThreadPoolExecutor(1) as pool:
        watcher = pool.submit(watch)
        host.publish(fake_checkpoint(tmp_path / "src" / "000001", b"s" * 20_000_000), "000001")
        host.publish(fake_checkpoint(tmp_path / "src" / "000002", b"t" * 1000), "000002")
        publishing = False
        watcher.result()
    assert seen and all(whole for _, whole in seen), set(seen)
    assert sorted(p.name for p in root.iterdir()) == ["000001", "000002"]
    assert (root / "000002" / "pretrained_model" / "model.safetensors").read_bytes() == b"t" * 1000
    assert not any(p.is_file() for p in (tmp_path / "staging").rglob("*"))


@pytest.mark.cluster  # a local Ray of this module's
def test_retention_spares_a_checkpoint_that_is_being_fetched(local_ray, tmp_path):
    # A restarted worker group fetches 000001 while the previous attempt still publishes newer ones.
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging", 1)
    keeper = host.keeper
    host.publish(fake_checkpoint(tmp_path / "src" / "000001", b"1" * 1000), "000001")
    _, lease = ray.get(keeper.manifest.remote("000001"))  # a fetch has begun
    _, other = ray.get(keeper.manifest.remote("000001"))  # and a second one
    host.publish(fake_checkpoint(tmp_path / "src" / "000002", b"2" * 1000), "000002")
    assert steps(keeper) == [1, 2]
    ray.get([keeper.release.remote("000001", lease) for _ in range(2)])  # one ends, its word said twice
    assert steps(keeper) == [1, 2]  # the other still reads
    ray.get(keeper.release.remote("000001", other))  # ... and ends: retention goes on at once, not at a later save
    assert steps(keeper) == [2]


@pytest.mark.parametrize(
    "keeper, local, attempt, source",
    [
        (None, [30, None], 2, None),  # rank 0's node alone has step 30: the other node could not resume it
        (20, [30, None], 2, ("keeper", 20)),  # ... so the keeper's, which every node can fetch
        (None, [30, 30], 2, ("local", 30)),  # one node (or a shared filesystem): no fetch needed
        (20, [30, 30], 2, ("local", 30)),  # the newer of the two
        (30, [20, 20], 2, ("keeper", 30)),
        (30, [30, 30], 1, ("keeper", 30)),  # a restarted job: the keeper's, never stale local files
        (None, [30, 30], 1, None),
        (None, [None, None], 3, None),
    ],
)
def test_a_restart_resumes_only_from_a_checkpoint_every_rank_can_reach(keeper, local, attempt, source):
    assert resume_source(keeper, local, attempt) == source


@pytest.mark.cluster  # a local Ray of this module's
def test_retention_keeps_exactly_k(local_ray, tmp_path):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging", 2)
    keeper = host.keeper
    for step in range(1, 6):
        host.publish(fake_checkpoint(tmp_path / "src" / f"{step:06d}", b"y" * 1000), f"{step:06d}")
    assert steps(keeper) == [4, 5]


@pytest.mark.cluster  # a local Ray of this module's
def test_checkpoints_are_ordered_by_step_not_text(local_ray, tmp_path):
    # LeRobot pads to max(6, len(str(steps))): a run relaunched with --steps=1000000 after 500000 writes 0505000.
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging", 2)
    keeper = host.keeper
    for step in ("499000", "500000", "0505000"):
        host.publish(fake_checkpoint(tmp_path / "src" / step, b"z" * 100), step)
    assert ray.get(keeper.newest_complete.remote()) == "0505000"
    assert steps(keeper) == [500000, 505000]  # retention dropped the oldest step


@pytest.mark.cluster  # a local Ray of this module's
def test_a_manifest_naming_files_outside_its_checkpoint_is_quarantined(local_ray, tmp_path):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging")
    keeper = host.keeper
    host.publish(fake_checkpoint(tmp_path / "src" / "000001", b"a" * 100), "000001")
    root = tmp_path / "root" / "checkpoints"
    evil = root / "000002"
    (evil / "pretrained_model").mkdir(parents=True)
    (tmp_path / "root" / "secret").write_text("s")
    (evil / MANIFEST).write_text(json.dumps({"../../secret": {"size": 1, "sha256": "0" * 64}}))
    assert ray.get(keeper.newest_complete.remote()) == "000001"
    assert [p.name[:6] for p in (tmp_path / "root" / "quarantine").iterdir()] == ["000002"]
    assert (tmp_path / "root" / "secret").read_text() == "s"


@pytest.mark.cluster  # a local Ray of this module's
def test_s3_root_publishes_manifest_last_and_resumes(local_ray, s3_server, tmp_path):
    # The module's Ray cluster started before the endpoint existed: hand the keeper its address.
    host = OneHost("s3://ckpts/run1", tmp_path / "staging", options={"runtime_env": {"env_vars": s3_server.env}})
    keeper = host.keeper
    host.publish(fake_checkpoint(tmp_path / "src" / "000003"), "000003")
    keys = {o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="ckpts")["Contents"]}
    assert "run1/checkpoints/000003/raycluster_manifest.json" in keys
    # An upload that died before its manifest: never resumed from, moved aside.
    boto3.client("s3").put_object(
        Bucket="ckpts", Key="run1/checkpoints/000009/pretrained_model/model.safetensors", Body=b"half"
    )
    assert ray.get(keeper.newest_complete.remote()) == "000003"
    assert S3Store("s3://ckpts/run1/checkpoints").names() == ["000003"]
    # Two nodes fetch it at once through the keeper's concurrent calls: each file is read from its own object
    # as it is served (S3 sends what the fetches assemble, no more), and neither fetch removes the other's.
    before = s3_server.bytes_read
    targets = [tmp_path / "back" / "000003", tmp_path / "other-node" / "000003"]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda target: fetch_directory(keeper, "000003", target), targets))
    for target in targets:
        assert (target / "training_state" / "training_step.json").read_text() == '{"step": 1}'
    assembled = sum(p.stat().st_size for target in targets for p in target.rglob("*") if p.is_file())
    assert s3_server.bytes_read - before <= 1.1 * assembled, (s3_server.bytes_read - before, assembled)


@pytest.mark.cluster  # a local Ray of this module's
def test_listing_trusts_what_the_keeper_published_and_a_resume_reads_it_whole(local_ray, tmp_path):
    # The stop window and every save's retention list the kept checkpoints: no re-hash of each one every time.
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging")
    keeper = host.keeper
    for step in ("000001", "000002"):
        host.publish(fake_checkpoint(tmp_path / "src" / step, b"b" * 100), step)
    newest = tmp_path / "root" / "checkpoints" / "000002" / "pretrained_model" / "model.safetensors"
    newest.write_bytes(b"c" * 100)  # same size, other bytes: only a checksum tells
    assert ray.get(keeper.complete_names.remote()) == ["000001", "000002"]
    assert ray.get(keeper.newest_complete.remote()) == "000002"  # committed here: checked where it is read
    with pytest.raises(RuntimeError, match="fails its checksum"):  # a resume's fetch reads it whole
        fetch_directory(keeper, "000002", tmp_path / "resumed" / "000002", host.store)
    assert ray.get(keeper.newest_complete.remote()) == "000001"  # moved aside: never resumed from again
    assert ray.get(keeper.complete_names.remote()) == ["000001"]


@pytest.mark.cluster  # a local Ray of this module's
def test_a_fetch_whose_worker_died_holds_its_checkpoint_no_longer_than_its_lease(local_ray, tmp_path):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging", 1, read_lease_s=0.5)
    keeper = host.keeper
    host.publish(fake_checkpoint(tmp_path / "src" / "000001", b"f" * 100), "000001")
    ray.get(keeper.manifest.remote("000001"))  # a fetch began, and its worker was killed: no release ever comes
    time.sleep(1)
    host.publish(fake_checkpoint(tmp_path / "src" / "000002", b"f" * 100), "000002")
    assert steps(keeper) == [2]  # retention went on once the lease ran out


def test_a_record_names_each_files_xxh3_and_one_written_with_sha256_is_still_checked(tmp_path):
    checkpoint = fake_checkpoint(tmp_path / "000001", b"w" * 100)
    record = manifest_of(checkpoint)
    assert set(record["pretrained_model/model.safetensors"]) == {"size", "xxh3_128"}
    assert problems(checkpoint, record) is None
    # The record of an earlier raycluster: SHA-256, still resumed from, still checked.
    older = {
        relpath: {
            "size": (checkpoint / relpath).stat().st_size,
            "sha256": hashlib.sha256((checkpoint / relpath).read_bytes()).hexdigest(),
        }
        for relpath in record
    }
    assert problems(checkpoint, older) is None
    (checkpoint / "pretrained_model" / "model.safetensors").write_bytes(b"w" * 99 + b"x")  # same size, other bytes
    said = "pretrained_model/model.safetensors fails its checksum"
    assert problems(checkpoint, record) == said and problems(checkpoint, older) == said
    unknown = {relpath: {"size": entry["size"], "md5": "0" * 32} for relpath, entry in record.items()}
    assert "has no checksum this raycluster reads (xxh3_128, sha256)" in problems(checkpoint, unknown)


def test_scratch_of_a_killed_process_is_removed_and_no_one_elses(tmp_path):
    host, gone = socket.gethostname(), dead_pid()
    left = tmp_path / f".000004.fetching.scratch-{host}-{gone}"
    living = tmp_path / f".000004.fetching.scratch-{host}-{os.getppid()}"  # pytest's parent: running
    elsewhere = tmp_path / f".000004.fetching.scratch-{host}x-{gone}"  # another host's, in a folder both see
    mine = tmp_path / f".000004.fetching{owned_suffix()}"
    for path in (left, living, elsewhere, mine):
        (path / "pretrained_model").mkdir(parents=True)
    assert remove_orphans(tmp_path, ".000004.fetching.scratch-*") == [left]
    assert not left.exists() and living.exists() and elsewhere.exists() and mine.exists()


@pytest.mark.cluster  # a local Ray of this module's
def test_a_fetch_removes_what_a_killed_fetch_left_beside_its_target(local_ray, tmp_path):
    host = OneHost(str(tmp_path / "root"), tmp_path / "staging")
    keeper = host.keeper
    host.publish(fake_checkpoint(tmp_path / "src" / "000001", b"f" * 100), "000001")
    # A fetch of the same checkpoint whose worker was killed: its pid is gone, a whole checkpoint is left.
    left = tmp_path / f".resumed.fetching.scratch-{socket.gethostname()}-{dead_pid()}"
    fake_checkpoint(left, b"f" * 100)
    assert fetch_directory(keeper, "000001", tmp_path / "resumed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resumed", "root", "src", "staging"]


@pytest.mark.cluster  # a local Ray of this module's
def test_a_failed_s3_publish_keeps_no_staged_copy(local_ray, s3_endpoint, tmp_path):
    staging = tmp_path / "staging"
    host = OneHost("s3://no-such-bucket/run", staging, options={"runtime_env": {"env_vars": s3_endpoint}})
    with pytest.raises(Exception, match="NoSuchBucket|does not exist"):
        host.publish(fake_checkpoint(tmp_path / "src" / "000001"), "000001")
    assert [p for p in staging.rglob("*") if p.is_file()] == []  # nothing left to fill the disk save after save


@pytest.mark.cluster  # a local Ray of this module's
def test_an_s3_object_of_the_right_size_with_other_bytes_is_quarantined_not_resumed_forever(
    local_ray, s3_endpoint, tmp_path
):
    host = OneHost("s3://ckpts/corrupt", tmp_path / "staging", options={"runtime_env": {"env_vars": s3_endpoint}})
    for step in ("000001", "000002"):
        host.publish(fake_checkpoint(tmp_path / "src" / step, b"d" * 100), step)
    key = "corrupt/checkpoints/000002/pretrained_model/model.safetensors"
    boto3.client("s3").put_object(Bucket="ckpts", Key=key, Body=b"e" * 100)
    fresh = CheckpointKeeper.options(runtime_env={"env_vars": s3_endpoint}).remote("s3://ckpts/corrupt")
    # A restarted job's keeper goes by the listing (the sizes match); the resume's fetch reads the bytes.
    assert ray.get(fresh.newest_complete.remote()) == "000002"
    with pytest.raises(RuntimeError, match="fails its checksum"):
        fetch_directory(fresh, "000002", tmp_path / "resumed")
    assert not (tmp_path / "resumed").exists()
    assert ray.get(fresh.newest_complete.remote()) == "000001"  # the next attempt's resume: never that one again
    assert S3Store("s3://ckpts/corrupt/checkpoints").names() == ["000001"]


@pytest.mark.cluster  # a local Ray of this module's
def test_an_s3_root_serves_a_file_by_reading_that_object_alone(local_ray, s3_server, tmp_path):
    # As keeper_and_part_stores builds them, each told where S3 is (this module's Ray started before the server).
    s3 = {"runtime_env": {"env_vars": s3_server.env}}
    host = OneHost("s3://ckpts/ranged", tmp_path / "staging", options=s3)
    keeper, local = host.keeper, host.store
    checkpoint = fake_checkpoint(tmp_path / "src" / "000001", b"m" * 3_000_000)
    (checkpoint / "training_state" / "optimizer_state.safetensors").write_bytes(b"o" * 9_000_000)
    host.publish(checkpoint, "000001")
    before = s3_server.bytes_read
    assert fetch_directory(keeper, "000001", tmp_path / "model", local, only="pretrained_model")
    model = tmp_path / "model" / "pretrained_model" / "model.safetensors"
    assert model.read_bytes() == b"m" * 3_000_000
    # What S3 sent for the fetch, over what it assembled: the model's object, not the whole checkpoint.
    amplification = (s3_server.bytes_read - before) / model.stat().st_size
    print(f"s3_read_amplification = {amplification:.3f}")
    assert amplification <= 1.1, amplification
    # Served by the keeper too (an evaluation's fetch, on a node with no part store of its own).
    before = s3_server.bytes_read
    assert fetch_directory(keeper, "000001", tmp_path / "eval", only="pretrained_model")
    assert (s3_server.bytes_read - before) / model.stat().st_size <= 1.1


def test_only_ascii_digits_name_a_checkpoint(tmp_path):
    for name in ("000003", "00000²", "last"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert LocalStore(tmp_path / "checkpoints").names() == ["000003"]  # '²'.isdigit(), yet int('00000²') fails


COMMON = [*SHARED, "--log_freq=1"]


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")
def test_a_checkpoint_that_cannot_be_published_fails_the_run_naming_it(dataset, tmp_path):
    # A checkpoint root on a 1 MiB filesystem: every ~130 MB checkpoint fails to publish (disk full).
    root = tmp_path / "full"
    root.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)], check=True)
    try:
        result = run_cli(
            "train",
            "--cluster.num_workers=1",
            f"--cluster.checkpoint_dir={root}",
            *dataset_flags(dataset),
            *TINY_ACT,
            *COMMON,
            "--steps=4",
            "--save_freq=2",
            f"--output_dir={tmp_path}/out",
        )
    finally:
        subprocess.run(["umount", "-l", str(root)], check=True)
    assert result.returncode == 1, result.stderr[-3000:]
    error = [line for line in result.stderr.splitlines() if line.startswith("raycluster train:")]
    assert error and "checkpoint 000004 was not published" in error[-1] and "No space left" in error[-1], result.stderr[
        -3000:
    ]
    summary = read_summary(tmp_path / "out")
    assert summary["final_step"] == 4 and "000004" in summary["uploads_failed"]  # training itself went on to the end


def s3_has(key: str) -> bool:
    return boto3.client("s3").list_objects_v2(Bucket="ckpts", Prefix=key).get("KeyCount", 0) > 0


@pytest.mark.slow
def test_killed_workers_resume_then_ctrl_c_saves_the_step_reached_to_s3_and_a_rerun_resumes_from_it(
    dataset, s3_endpoint, tmp_path, rng
):
    # One run carries three faults in order (one private cluster instead of two): rank 1 is killed after
    # checkpoint 5, then the new group's rank 0 (the shipper's rank) after 15; once the third attempt trains,
    # Ctrl-C at a moment the test does not choose saves the step reached to S3; a rerun on one worker resumes it.
    out = tmp_path / "out"
    flags = [
        "--cluster.num_workers=2",
        "--cluster.max_failures=2",
        "--cluster.checkpoint_dir=s3://ckpts/act",
        *dataset_flags(dataset),
        *TINY_ACT,
        *COMMON,
        "--save_freq=5",
        f"--output_dir={out}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "raycluster", "train", *flags, "--steps=1000"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, pids, killed, attempts = [], {}, [], 0
    victims = [(1, "000005"), (0, "000015")]
    for line in proc.stdout:
        output.append(line)
        if m := re.search(r"raycluster worker rank (\d+) of 2, pid (\d+)", line):
            pids[int(m.group(1))] = int(m.group(2))
            attempts += m.group(1) == "0"
        if len(killed) < len(victims):
            rank, after = victims[len(killed)]
            if pids.get(rank) not in (None, *killed) and s3_has(f"act/checkpoints/{after}/{MANIFEST}"):
                os.kill(pids[rank], signal.SIGKILL)
                killed.append(pids[rank])
        elif attempts == 3 and re.search(r"step:\d+ ", line):  # the third attempt trains
            break
    time.sleep(pick(rng, 0, 2, "seconds before SIGINT"))  # a moment the test does not choose
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=300)
    text = "".join(output) + rest
    assert proc.returncode == 130, text[-4000:]
    step = int(re.search(r"raycluster train: stopped by SIGINT at step (\d+); checkpoint \d+ saved", text).group(1))
    # Steps the driver had shown before it took the signal were done before it (rank 0's lines reach the driver
    # late, so it may have trained more): the step reached is saved, and no step trained lies beyond it.
    logged = [int(s) for s in re.findall(r"step:(\d+) ", text)]
    reached = max(int(s) for s in re.findall(r"step:(\d+) ", text[: text.index("SIGINT: saving the current step")]))
    assert reached <= step and max(logged) <= step, (reached, logged, step)
    store = S3Store("s3://ckpts/act/checkpoints")
    assert store.names()[-1] == f"{step:06d}" and all(store.problems(name) is None for name in store.names())
    summary = read_summary(out)
    assert summary["stopped_by"] == "SIGINT" and summary["final_step"] == step and summary["checkpoints"][-1] == step
    assert summary["restarts"] == 2 and summary["resumed_from"] is not None and summary["resumed_from"] >= 15
    # Rank 0's own copies older than what the keeper holds are gone: node-local scratch stays bounded.
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"{step:06d}", "last"]
    # The curves mark both restarts where each attempt resumed, and the checkpoint of the step reached.
    events = [(event, row["step"]) for row in recorded_rows(out)["out"] for event in row if "event/" in event]
    restarts = [at for event, at in events if event == "event/restart"]
    assert len(restarts) == 2 and 5 <= restarts[0] < restarts[1] and restarts[1] >= 15, events
    assert [at for event, at in events if event == "event/resume"] == restarts, events
    assert step in {at for event, at in events if event == "event/checkpoint"}, events
    # Each recovery's phases, from the failure Ray Train's controller saw to the first resumed step.
    recoveries = summary["recoveries"]
    assert [list(r) for r in recoveries] == [[*RECOVERY, "seconds"]] * 2, recoveries
    for recovery in recoveries:
        assert [recovery[name] for name in RECOVERY] == sorted(recovery[name] for name in RECOVERY), recoveries
        assert 0 < recovery["seconds"] < 120 and recovery["failure_seen"] > summary["phases"]["first_step"]
    # The ledger of this start (kept in the output dir: the checkpoint root is S3): its three groups trained
    # more steps than it progressed, by those each failed group finished after the checkpoint the next resumed
    # from; the recoveries are a part of its time, and the parts add up.
    [start] = summary["ledger"]["starts"]
    assert (start["first_step"], start["last_step"], start["steps_trained"] - start["steps_redone"]) == (0, step, step)
    assert start["parts"]["recovery"] > 0 and abs(sum(start["parts"].values()) - start["wall_s"]) < 0.05, start

    # The rerun on another number of workers (a new job with another instance count does the same).
    one_worker = ["--cluster.num_workers=1", *flags[2:]]
    rerun = run_cli("train", *one_worker, f"--steps={step + 2}")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = read_summary(out)
    assert summary["resumed_from"] == step and summary["final_step"] == step + 2 and summary["stopped_by"] is None
    assert [(s["first_step"], s["last_step"]) for s in summary["ledger"]["starts"]] == [(0, step), (step, step + 2)]
    # What the rerun saved after the step reached: its periodic saves (--save_freq=5) and its last step, in S3.
    after = sorted({s for s in (step + 1, step + 2) if s % 5 == 0} | {step + 2})
    assert [c for c in summary["checkpoints"] if c >= step] == [step, *after] and summary["world_size"] == 1
    assert [name for name in store.names() if int(name) >= step] == [f"{c:06d}" for c in (step, *after)]
    # LeRobot's own word that the data order is sample-exact only at the same world size: once, from rank 0.
    said = (rerun.stdout + rerun.stderr).count("but the checkpoint was written with num_processes=2")
    assert said == 1, rerun.stderr[-3000:]
