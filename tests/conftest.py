"""Shared fixtures: an isolated HOME and Ray settings per test session, one small dataset for all."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from raycluster.demo import TINY_ACT
from raycluster.lerobot.dataset import SyntheticDatasetSpec, make_synthetic_dataset
from s3_server import S3Server
from simulated import Sim, start_sim

pytest_plugins = ["ray_guard", "pytester"]  # a test marked neither cluster nor slow starts no Ray (ray_guard.py)

REPO = Path(__file__).resolve().parent.parent
LEROBOT_MAIN_WHEELS = REPO.parent / "shared" / "wheels"
LEROBOT_LINE = "RAYCLUSTER_TEST_LEROBOT_LINE"
"""Which LeRobot line a test process expects to find installed: ``0.6`` (the registry's), or ``main``."""
# The flags every test run shares with the tiny ACT (``raycluster.demo.TINY_ACT``): 4 samples a batch, no
# DataLoader processes, a fixed seed.
COMMON = ["--batch_size=4", "--num_workers=0", "--seed=1"]


def as_hyperparameters(flags: list[str]) -> dict:
    """Flags as a user's own ModelTrainer would send them: keys in the form SageMaker's driver carries
    (``policy__type``), values JSON-typed where they read as JSON (``false``, ``null``, ``64``)."""
    hps = {}
    for flag in flags:
        name, text = flag[2:].split("=", 1)
        try:
            hps[name.replace(".", "__")] = json.loads(text)
        except json.JSONDecodeError:
            hps[name.replace(".", "__")] = text
    return hps


TINY_ACT_HPS = {**as_hyperparameters([*TINY_ACT, *COMMON]), "dataset__repo_id": "raycluster/synthetic"}
LOSS_LINE = re.compile(r"step:(\d+) .*?loss:([0-9.]+)")


@pytest.fixture(scope="session", autouse=True)
def isolated_env(tmp_path_factory):
    """Never touch the machine's ~/.ray: Ray writes its auth token under HOME, and a local
    ray.init() would otherwise turn token auth on for every later `ray start` there."""
    home = tmp_path_factory.mktemp("home")
    saved = dict(os.environ)
    os.environ.update(
        HOME=str(home),
        RAY_AUTH_MODE="disabled",
        RAY_DEDUP_LOGS="0",
        RAY_USAGE_STATS_ENABLED="0",
        HF_HUB_OFFLINE="1",
        HF_LEROBOT_HOME=str(home / "lerobot"),
        WANDB_MODE="disabled",
        PYTHONUNBUFFERED="1",
    )
    yield home
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory, isolated_env) -> SyntheticDatasetSpec:
    spec = SyntheticDatasetSpec(root=tmp_path_factory.mktemp("data") / "synthetic")
    make_synthetic_dataset(spec)
    return spec


@pytest.fixture(scope="session")
def one_worker_run(dataset, tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """One local run on one worker that two tests read (a run each would cost a minute more): 20 steps at a rate
    that learns in 20, a checkpoint every 10, LeRobot's own held-out loss every 10 (a quarter of the episodes
    held out), its checkpoints (``checkpoints/`` beside the output dir) and the final model, read back from the
    last of them, in folders of their own. (output_dir, model_dir, the finished command)"""
    work = tmp_path_factory.mktemp("one-worker")
    flags = ["--steps=20", "--save_freq=10", "--log_freq=1", "--policy.optimizer_lr=0.001"]
    flags += ["--dataset.eval_split=0.25", "--eval_steps=10"]
    result = run_cli("train", "--cluster.num_workers=1", *dataset_flags(dataset), *TINY_ACT, *COMMON, *flags,
                     f"--output_dir={work / 'run'}", f"--cluster.checkpoint_dir={work / 'checkpoints'}",
                     f"--cluster.model_dir={work / 'model'}")  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return work / "run", work / "model", result


@pytest.fixture
def rng(request) -> random.Random:
    """The test's random choices (a moment to act, a delay), replayable: its seed is printed with the command
    that replays it, and ``RAYCLUSTER_TEST_SEED`` given replays it."""
    seed = int(os.environ.get("RAYCLUSTER_TEST_SEED") or random.SystemRandom().randrange(2**32))
    print(f"random seed {seed}; replay: RAYCLUSTER_TEST_SEED={seed} .venv/bin/python -m pytest '{request.node.nodeid}'")
    return random.Random(seed)


def pick(rng: random.Random, low: float, high: float, what: str) -> float:
    """One random choice of the test's, printed."""
    value = rng.uniform(low, high)
    print(f"random choice: {what} = {value:.3f}")
    return value


def dataset_flags(spec: SyntheticDatasetSpec) -> list[str]:
    return [f"--dataset.repo_id={spec.repo_id}", f"--dataset.root={spec.root}"]


def dead_pid() -> int:
    """The pid of a process that ran on this host and has ended (what a killed fetch or evaluation leaves)."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    return ended.pid


def run_cli(*args: str, timeout: float = 600, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, in its own process (``env``: variables added to this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "raycluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="session")
def lerobot_main_wheel() -> Path:
    """LeRobot main as a wheel (no release has it yet): the project's shared folder beside the clone has it."""
    wheel = next(iter(sorted(LEROBOT_MAIN_WHEELS.glob("lerobot-*.whl"))), None)
    if wheel is None:
        pytest.skip(f"LeRobot main's wheel is not in {LEROBOT_MAIN_WHEELS} (a clone without the project's shared/)")
    return wheel


@pytest.fixture(scope="session")
def lerobot_main(lerobot_main_wheel, tmp_path_factory) -> dict[str, str]:
    """The environment that runs LeRobot main over this one: its wheel installed alone into a directory put
    first on PYTHONPATH (it trains with the dependencies 0.6.1 installed), which every Ray node and worker a
    test starts inherits. This environment itself is not changed."""
    target = tmp_path_factory.mktemp("lerobot-main")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(lerobot_main_wheel)],
        check=True,
        capture_output=True,
    )
    return {"PYTHONPATH": str(target), LEROBOT_LINE: "main"}


def recorded_rows(run_dir: Path) -> dict[str, list[dict]]:
    """What the run's store holds, read by trackio in a process of its own (it reads TRACKIO_DIR once)."""
    code = "import json, sys; from pathlib import Path; from raycluster.curves.view import series; "
    code += "print(json.dumps(series(Path(sys.argv[1]))))"
    result = subprocess.run([sys.executable, "-c", code, str(run_dir / "curves")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def write_hub_cache(cache: Path, repo_id: str, folder: Path) -> None:
    """``folder`` as one revision of model repo ``repo_id`` in a Hub cache, laid out as ``hf download
    --cache-dir`` lays it out: content-addressed blobs, a snapshot of relative links to them, refs/main."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    commit = hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()
    for path in files:
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)


def logged_losses(output: str) -> dict[int, float]:
    """LeRobot's own per-step log lines (``step:N ... loss:X``), as printed by rank 0."""
    return {int(step): float(loss) for step, loss in LOSS_LINE.findall(output)}


@pytest.fixture(scope="module")
def s3_server():
    """A moto S3 server on loopback (bucket ``ckpts``), reached by real boto3 through AWS_ENDPOINT_URL."""
    server = S3Server()
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    boto3.client("s3").create_bucket(Bucket="ckpts")
    yield server
    for k, v in saved.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    server.stop()


@pytest.fixture(scope="module")
def s3_endpoint(s3_server):
    """The S3 server's environment (AWS_ENDPOINT_URL and test credentials), for actors and subprocesses."""
    return s3_server.env


@pytest.fixture
def sims():
    """Starts ``raycluster sim`` runs (``sims(workdir, *args)``) and stops every one still running when the
    test ends, passed or failed, with its hosts' namespaces: one failure stays one failure."""
    started: list[Sim] = []

    def start(workdir: Path, *args: str, cwd: Path = REPO) -> Sim:
        started.append(start_sim(workdir, *args, cwd=cwd))
        return started[-1]

    yield start
    for sim in started:
        sim.stop()


@pytest.fixture
def job(sims, dataset):
    """Starts a simulated job of ``hosts`` hosts with ``hps`` as its hyperparameters and the test dataset as its
    channel; the ``sims`` fixture stops it however the test ends."""

    def start(workdir: Path, hosts: int, hps: dict, *extra: str) -> Sim:
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "hps.json").write_text(json.dumps(hps))
        return sims(
            workdir,
            f"--hosts={hosts}",
            f"--hyperparameters={workdir / 'hps.json'}",
            f"--channel=dataset={dataset.root}",
            *extra,
        )

    return start
