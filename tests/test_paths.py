"""Every path a user gives means what it means where the command was typed, on every worker."""

from pathlib import Path

import pytest

from raycluster.cluster_config import ClusterConfig
from raycluster.errors import UsageError
from raycluster.training.driver.paths import absolute_paths, pinned_output_dir


def test_relative_paths_become_absolute_against_the_users_directory(tmp_path):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    cluster, args = absolute_paths(
        ClusterConfig(checkpoint_dir="ckpt", model_dir="s3://bucket/model"),
        [
            "--dataset.root=data/x",
            "--output_dir=outputs/a",
            "--config_path=c.json",
            "--policy.path=models/mine",
            "--policy.path=lerobot/act_aloha",
            "--steps=3",
            "--dataset.repo_id=a/b",
            "--output_dir=/abs",
        ],
        tmp_path,
    )
    assert cluster.checkpoint_dir == str(tmp_path / "ckpt") and cluster.model_dir == "s3://bucket/model"
    assert args == [
        f"--dataset.root={tmp_path}/data/x",
        f"--output_dir={tmp_path}/outputs/a",
        f"--config_path={tmp_path}/c.json",
        f"--policy.path={tmp_path}/models/mine",
        "--policy.path=lerobot/act_aloha",
        "--steps=3",
        "--dataset.repo_id=a/b",
        "--output_dir=/abs",
    ]


def test_a_relative_place_to_write_inside_rays_working_dir_copy_is_refused(tmp_path):
    copy = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_1"
    with pytest.raises(
        UsageError, match="--output_dir=outputs/rel is relative, and this job runs in Ray's temporary copy"
    ):
        absolute_paths(ClusterConfig(), ["--output_dir=outputs/rel"], copy)
    with pytest.raises(UsageError, match="--cluster.checkpoint_dir=ck is relative"):
        absolute_paths(ClusterConfig(checkpoint_dir="ck"), [], copy)
    # Inputs inside the copy are fine: they are there for as long as the job runs.
    (copy / "d").mkdir(parents=True)
    assert absolute_paths(ClusterConfig(), ["--dataset.root=d"], copy)[1] == [f"--dataset.root={copy}/d"]
    # One Ray did not upload (git-ignored, as data/ is) is named, with the fix.
    with pytest.raises(UsageError, match=r"--dataset.root=data/synthetic is not in Ray's copy .*give an absolute path"):
        absolute_paths(ClusterConfig(), ["--dataset.root=data/synthetic"], copy)
    with pytest.raises(UsageError, match="write path flags as --output_dir=PATH"):
        absolute_paths(ClusterConfig(), ["--output_dir", "x"], Path("/"))


def test_no_output_dir_inside_rays_working_dir_copy_is_refused_and_elsewhere_pinned_absolute(tmp_path):
    # LeRobot's default output dir is relative: in Ray's copy of the --working-dir it would vanish with the job.
    copy = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_1"
    default = "outputs/train/2026-12-07/06-00-00_act"
    with pytest.raises(UsageError, match=r"no --output_dir given, .*\(outputs/train/.*give --output_dir=ABSOLUTE_PATH"):
        pinned_output_dir(default, copy)
    assert pinned_output_dir("/runs/a", copy) == "/runs/a"  # a --config_path file's absolute one is kept
    assert pinned_output_dir(default, tmp_path) == f"{tmp_path}/{default}"
