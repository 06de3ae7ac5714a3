"""LeRobot's flags on the driver, read without importing LeRobot, and LeRobot's verdict on them, given on the ranks:
what the driver reads is what LeRobot resolves, the driver never imports LeRobot, and one rank's refusal ends
every rank with its reason."""

import datetime as dt
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from conftest import TINY_ACT
from raycluster.errors import UsageError
from raycluster.lerobot.api import parse_train_config, validated
from raycluster.lerobot.flags import read_flags
from raycluster.lerobot.lines import LineSettings
from raycluster.training.worker.config import WorkerConfig
from raycluster.training.worker.flags_check import FlagsRefused, agree_on_flags

DATASET = ["--dataset.repo_id=x/y"]


def resolved(args: list[str]):
    """What LeRobot makes of ``args``, and what the driver reads of them."""
    return parse_train_config(args, validate=True), read_flags(args, dt.datetime.now())


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--env.type=pusht", "--dataset.eval_split=0.25", "--save_checkpoint=false"],
        ["--job_name=mine", "--save_checkpoint=False"],
    ],
)
def test_what_the_driver_reads_is_what_lerobot_resolves(flags, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # LeRobot's default output dir is relative
    cfg, read = resolved([*DATASET, *TINY_ACT, *flags])
    assert read.job_name == cfg.job_name
    assert (read.eval_split, read.has_env, read.save_checkpoint) == (
        cfg.dataset.eval_split,
        cfg.env is not None,
        cfg.save_checkpoint,
    )
    # LeRobot's default: outputs/train/<date>/<time>_<job>; the driver pins it, so only its form must agree.
    ours, theirs = Path(read.output_dir), Path(cfg.output_dir)
    assert ours.parent.parent == theirs.parent.parent == Path("outputs/train")
    assert ours.name.split("_", 1)[1] == theirs.name.split("_", 1)[1] == cfg.job_name


def test_a_config_files_values_count_unless_a_flag_overrides_them(tmp_path):
    out = tmp_path / "saved"
    flags = [*DATASET, *TINY_ACT, "--env.type=pusht", "--dataset.eval_split=0.5", f"--output_dir={out}"]
    parse_train_config(flags, validate=True)._save_pretrained(tmp_path)
    config = [f"--config_path={tmp_path / 'train_config.json'}"]
    cfg, read = resolved([*config, "--save_checkpoint=false", f"--output_dir={tmp_path / 'new'}"])
    assert (
        (read.eval_split, read.has_env, read.job_name)
        == (0.5, True, "pusht_act")
        == (
            cfg.dataset.eval_split,
            cfg.env is not None,
            cfg.job_name,
        )
    )
    assert read.output_dir == str(cfg.output_dir) == str(tmp_path / "new")
    assert read.save_checkpoint is cfg.save_checkpoint is False


def test_a_checkpoints_directory_is_read_as_lerobot_reads_it_and_what_cannot_be_read_is_refused(tmp_path):
    parse_train_config([*DATASET, *TINY_ACT, "--env.type=pusht"], validate=True)._save_pretrained(tmp_path)
    assert read_flags([f"--config_path={tmp_path}"], dt.datetime.now()).job_name == "pusht_act"
    (tmp_path / "broken.json").write_text("{ not json")
    for path, said in ((tmp_path / "broken.json", "not a readable config file"), ("lerobot/act_pusht", "Hub one")):
        with pytest.raises(UsageError, match=said):
            read_flags([f"--config_path={path}"], dt.datetime.now())


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--dataset.eval_split=a_tenth", "--dataset.eval_split=a_tenth: a share of the episodes"),
        ("--save_checkpoint=0", "--save_checkpoint=0: true or false"),  # draccus refuses it too
    ],
)
def test_a_value_the_driver_cannot_read_is_refused_naming_the_flag(flag, said):
    with pytest.raises(UsageError, match=said):
        read_flags([*DATASET, flag], dt.datetime.now())


def test_the_ranks_leave_the_output_dirs_check_to_the_driver(tmp_path):
    # A worker group that Ray Train starts again finds the output dir its first one made: the ranks' validation
    # must not refuse it, while LeRobot's own validation (what the driver does before any cluster) would.
    args = [*DATASET, *TINY_ACT, f"--output_dir={tmp_path}"]
    cfg = parse_train_config(args, validate=False)
    with pytest.raises(UsageError, match="already exists"):
        validated(cfg, args)
    assert validated(cfg, args, output_dir_checked=True).output_dir == cfg.output_dir == tmp_path


DRIVER = """
import sys
from raycluster.cluster_config import ClusterConfig
from pathlib import Path
from raycluster.training.driver.run import prepare_lerobot_args
args = ["--dataset.repo_id=x/y", "--policy.type=act"]
flags, args, plan = prepare_lerobot_args(ClusterConfig(), args, False, Path.cwd())
print([arg for arg in args if arg.startswith("--output_dir=")])
print(sorted(m for m in sys.modules if m.startswith("lerobot")))
"""


def test_the_driver_reads_the_flags_without_importing_lerobot_and_pins_an_absolute_output_dir(tmp_path):
    # LeRobot's import costs the driver ~8 s a run; the ranks import it anyway. Its default output dir is relative,
    # and Ray Train's workers run in directories of their own: the driver pins it absolute.
    read = subprocess.run([sys.executable, "-c", DRIVER], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    pinned, modules = read.stdout.strip().splitlines()[-2:]
    assert modules == "[]"
    assert pinned.startswith(f"['--output_dir={tmp_path}/outputs/train/") and pinned.endswith("_act']"), pinned


def agree(rank: int, port: int, args_by_rank: list[list[str]], verdicts) -> None:
    """One of two ranks (a process of its own, over gloo): its verdict on its flags, after both agreed."""
    args = args_by_rank[rank]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    worker = WorkerConfig(args, False, "auto", journal=None, line_settings=LineSettings(2))
    try:
        agree_on_flags(worker, rank, 2)
        verdicts[rank] = "agreed"
    except FlagsRefused as refused:
        verdicts[rank] = str(refused)
    finally:
        dist.destroy_process_group()


def test_a_flag_one_rank_refuses_ends_every_rank_with_its_reason():
    # Rank 1 alone is given a step count LeRobot cannot read: rank 0, which took its flags, ends too, with the
    # reason rank 1 got, before any other collective (else it would wait for rank 1 in one).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    good = [*DATASET, *TINY_ACT]
    verdicts = mp.get_context("spawn").Manager().dict()
    ranks = mp.spawn(agree, args=(port, [good, [*good, "--steps=ten"]], verdicts), nprocs=2, join=False)
    deadline = time.monotonic() + 180
    while not ranks.join(timeout=5) and time.monotonic() < deadline:
        pass
    for process in ranks.processes:  # a rank still waiting in the gather is stopped, not left behind
        process.kill()
    assert verdicts[0] == verdicts[1] and "Couldn't parse 'ten' into an int" in verdicts[0], dict(verdicts)
