"""``make bench ARGS="--only sharded-checkpoints"``, its S3 row: what each host reads from S3 to resume from a
checkpoint spread over 4 hosts on an S3 root, over the bytes its fetch assembled (``s3_read_amplification``).

Four part stores with their own staging stand for the 4 hosts, on one local Ray. Each host stages its own
shard (and rank 0's host the model's config and the training state), the keeper commits the parts, and then
each host fetches the whole checkpoint, as a resume does. A counting S3 server on loopback (moto, the tests'
own) measures the object bytes it sent during each fetch: an S3 root that downloads a whole checkpoint per
host to serve one file, or reads an object twice, shows here as a ratio above 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import ray

from raycluster.checkpoints.keeper import CheckpointKeeper
from raycluster.checkpoints.part_store import PartStore
from raycluster.checkpoints.transfer import fetch_directory

REPO = Path(__file__).resolve().parent.parent
HOSTS = 4
SHARD_MB = 8
COMMIT_WAIT_S = 60


def stage_parts(stores: list, work: Path, name: str) -> None:
    """Each host's part of ``name``: its own shard, and on the first host the config and training state."""
    calls = []
    for n, store in enumerate(stores):
        source = work / f"save-{n}" / name
        shards = source / "pretrained_model" / "pytorch_model_fsdp_0"
        shards.mkdir(parents=True)
        (shards / f"__{n}_0.distcp").write_bytes(os.urandom(SHARD_MB << 20))
        if n == 0:
            (source / "pretrained_model" / "config.json").write_text("{}")
            (source / "training_state").mkdir()
            (source / "training_state" / "training_step.json").write_text('{"step": 1}')
        calls.append(store.stage.remote(name, 1, n, len(stores), str(source)))
    ray.get(calls)


def amplification(work: Path) -> list[float]:
    """Per host: the S3 bytes its resume's fetch read, over the bytes that fetch assembled."""
    from s3_server import S3Server  # the tests' own (tests/ is on this process's path; see rows)

    server = S3Server()
    ratios = []
    try:
        os.environ.update(server.env)
        boto3.client("s3").create_bucket(Bucket="ckpts")
        ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": server.env})
        keeper = CheckpointKeeper.remote("s3://ckpts/bench")
        stores = [PartStore.remote("s3://ckpts/bench", str(work / f"staging-{n}"), keeper) for n in range(HOSTS)]
        ray.get(keeper.attach.remote(stores))
        stage_parts(stores, work, "000001")
        deadline = time.monotonic() + COMMIT_WAIT_S
        while ray.get(keeper.complete_names.remote()) != ["000001"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bench's checkpoint did not commit within {COMMIT_WAIT_S} s")
            time.sleep(0.2)
        for n, store in enumerate(stores):
            target, before = work / f"resumed-{n}" / "000001", server.bytes_read
            fetch_directory(keeper, "000001", target, store)
            assembled = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
            ratios.append((server.bytes_read - before) / assembled)
    finally:
        ray.shutdown()
        server.stop()
    return ratios


def rows(work: Path, env: dict) -> list[tuple[str, str, float, float, str, str]]:
    """The bench's row, measured in a process of its own (its own Ray, the bench's HOME and settings)."""
    print(f"bench: a resume from an S3 root on {HOSTS} hosts ...", flush=True)
    command = [sys.executable, "-m", "bench.s3_reads", str(work / "s3-reads")]
    # tests/ by path: a package installed beside ours is called ``tests`` too, and would shadow it by name.
    path = os.pathsep.join((str(REPO), str(REPO / "tests")))
    done = subprocess.run(command, capture_output=True, text=True, env={**env, "PYTHONPATH": path}, timeout=600)
    if done.returncode != 0:
        sys.exit(f"s3 reads bench failed ({done.returncode}):\n{done.stderr[-3000:]}")
    ratios = json.loads(done.stdout.strip().splitlines()[-1])
    worst = max(ratios)
    print("bench: S3 bytes read over bytes served, per host: " + ", ".join(f"{r:.3f}" for r in ratios))
    return [("sharded", f"s3_read_amplification ({HOSTS} hosts)", float("nan"), worst, f"{worst:.2f}", "<= 1.1")]


if __name__ == "__main__":
    print(json.dumps(amplification(Path(sys.argv[1]))))
