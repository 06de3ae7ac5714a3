"""Bad input: one clear line naming the field, a non-zero exit, nothing started or lost."""

import pytest

from conftest import TINY_ACT, dataset_flags, run_cli


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("raycluster train: error:")]


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--cluster.nodes=2"], "--cluster.nodes"),
        (["--cluster.num_workers=x"], "--cluster.num_workers"),
        (["--policy.type=no_such_policy"], "LeRobot rejected"),
        (["--steps=ten"], "LeRobot rejected"),
    ],
)
def test_rejected_flags(dataset, tmp_path, flags, names):
    result = run_cli("train", *dataset_flags(dataset), *TINY_ACT, f"--output_dir={tmp_path}/out", *flags)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and names in lines[0]
    assert "Started a local Ray instance" not in result.stderr + result.stdout


def test_missing_dataset_root(tmp_path):
    result = run_cli("train", "--dataset.repo_id=x/y", f"--dataset.root={tmp_path}/nope", *TINY_ACT)
    assert result.returncode == 2
    assert "--dataset.root" in error_lines(result.stderr)[0] and "does not exist" in result.stderr


def test_dataset_root_that_is_not_a_dataset(tmp_path):
    (tmp_path / "junk").mkdir()
    result = run_cli("train", "--dataset.repo_id=x/y", f"--dataset.root={tmp_path}/junk", *TINY_ACT)
    assert result.returncode == 2
    assert "is not a LeRobot dataset" in error_lines(result.stderr)[0]


def test_existing_output_dir_is_refused_and_kept(dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    result = run_cli("train", *dataset_flags(dataset), *TINY_ACT, f"--output_dir={out}")
    assert result.returncode == 2 and "already exists" in error_lines(result.stderr)[0]
    assert (out / "precious.txt").read_text() == "keep me"


@pytest.mark.cluster
def test_more_workers_than_the_cluster_has_fails_fast(dataset, tmp_path):
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
