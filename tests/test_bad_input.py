"""Bad input: one clear line naming the field, a non-zero exit, nothing started or lost.

What the driver refuses before any cluster starts (our flags, the dataset root, an output dir that exists) runs
``raycluster train``'s own entry (``train_job.train``, what the CLI's verb calls) in this process, and a refused
run starts nothing (the suite's Ray guard would fail it); our own flags' refusals and the one that needs a
cluster run the CLI as a user does, in a process of its own. A flag only LeRobot refuses is refused on the
ranks, so its tests run on a cluster: ``test_local_cluster.py`` (a running one) and ``test_sim.py``."""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TINY_ACT, dataset_flags, run_cli
from raycluster.training.driver.train_job import train


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("raycluster train: error:")]


@dataclass
class Refused:
    returncode: int
    stdout: str
    stderr: str


def train_here(capsys, *argv: str) -> Refused:
    code = train(list(argv))
    out, err = capsys.readouterr()
    return Refused(code, out, err)


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--cluster.nodes=2"], "--cluster.nodes"),
        (["--cluster.num_workers=x"], "--cluster.num_workers"),
        # The model is read back from the last committed checkpoint: with no checkpoint root there is none.
        (["--cluster.model_dir=/tmp/m"], "--cluster.model_dir=/tmp/m needs --cluster.checkpoint_dir"),
        (["--dataset.eval_split=a_tenth"], "--dataset.eval_split=a_tenth"),
    ],
)
def test_rejected_flags(dataset, tmp_path, flags, names, capsys):
    argv = [*dataset_flags(dataset), *TINY_ACT, f"--output_dir={tmp_path}/out", *flags]
    result = run_cli("train", *argv) if flags[0].startswith("--cluster.") else train_here(capsys, *argv)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and names in lines[0]
    assert "Started a local Ray instance" not in result.stderr + result.stdout


def test_missing_dataset_root(tmp_path, capsys):
    result = train_here(capsys, "--dataset.repo_id=x/y", f"--dataset.root={tmp_path}/nope", *TINY_ACT)
    assert result.returncode == 2
    assert "--dataset.root" in error_lines(result.stderr)[0] and "does not exist" in result.stderr


def test_dataset_root_that_is_not_a_dataset(tmp_path, capsys):
    (tmp_path / "junk").mkdir()
    result = train_here(capsys, "--dataset.repo_id=x/y", f"--dataset.root={tmp_path}/junk", *TINY_ACT)
    assert result.returncode == 2
    assert "is not a LeRobot dataset" in error_lines(result.stderr)[0]


def test_existing_output_dir_is_refused_and_kept(dataset, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    result = train_here(capsys, *dataset_flags(dataset), *TINY_ACT, f"--output_dir={out}")
    assert result.returncode == 2 and "already exists" in error_lines(result.stderr)[0]
    assert (out / "precious.txt").read_text() == "keep me"


@pytest.mark.cluster
def test_more_workers_than_the_cluster_has_fails_fast(dataset, tmp_path):
    sessions = set(Path(tempfile.gettempdir()).glob("raycluster-tmp-*"))  # where a private cluster's session goes
    result = run_cli(
        "train",
        "--cluster.num_workers=64",
        *dataset_flags(dataset),
        *TINY_ACT,
        f"--output_dir={tmp_path}/out",
        timeout=120,
    )
    assert result.returncode == 2
    assert "--cluster.num_workers=64 needs 64 CPUs" in error_lines(result.stderr)[0]
    # Bad input leaves no session behind (a failed run's is kept, for its logs).
    assert set(Path(tempfile.gettempdir()).glob("raycluster-tmp-*")) == sessions
