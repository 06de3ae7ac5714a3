"""One test per place raycluster reaches into LeRobot (``raycluster/lerobot/api.py``): a new LeRobot
release that moves any of them fails here, by name, before any cluster test does."""

import inspect
import os

import pytest
from lerobot.scripts import lerobot_train
from lerobot.utils import constants

from conftest import COMMON, LEROBOT_LINE, TINY_ACT, dataset_flags, logged_losses
from raycluster.cluster_config import ClusterConfig
from raycluster.errors import UsageError
from raycluster.lerobot import api as lerobot_api
from raycluster.lerobot.api import LoopHooks
from raycluster.lerobot.lines import Placement, installed_line, line_for, train_parameters
from raycluster.lerobot.lines.accelerator_built import AcceleratorBuilt
from raycluster.lerobot.lines.accelerator_given import AcceleratorGiven


def test_the_installed_lerobot_is_driven_by_the_adapter_its_train_fits():
    # 0.6.x: train(cfg, accelerator); main (LeRobot's next release): train(cfg), its own Accelerator.
    expected = {"0.6": AcceleratorGiven, "main": AcceleratorBuilt}[os.environ.get(LEROBOT_LINE, "0.6")]
    assert isinstance(installed_line(), expected)
    # The line is read from LeRobot's source, so that the driver need not import it: the same parameters.
    assert train_parameters()[0] == list(inspect.signature(lerobot_train.train).parameters)
    with pytest.raises(UsageError, match=r"train\(cfg, engine\).*LeRobot 0\.6\.x .* or LeRobot main"):
        line_for(["cfg", "engine"], True)  # a LeRobot whose train neither line fits
    with pytest.raises(UsageError, match=r"train\(cfg\)"):
        line_for(["cfg"], False)  # train(cfg) without LeRobot main's distributed factory


def test_checkpoint_layout_names_are_lerobots():
    assert lerobot_api.CHECKPOINTS == constants.CHECKPOINTS_DIR
    assert lerobot_api.LAST == constants.LAST_CHECKPOINT_LINK
    assert lerobot_api.PRETRAINED_MODEL == constants.PRETRAINED_MODEL_DIR


def test_flag_parser_parses_and_names_what_it_rejects(tmp_path):
    cfg = lerobot_api.parse_train_config(["--dataset.repo_id=x/y", *TINY_ACT, f"--output_dir={tmp_path}"], False)
    assert cfg.policy.type == "act" and cfg.policy.dim_model == 64
    with pytest.raises(UsageError, match="no_such_field"):
        lerobot_api.parse_train_config(["--dataset.repo_id=x/y", "--policy.type=act", "--no_such_field=1"], False)


def test_a_config_files_checkpoint_format_is_checked_as_resolved(tmp_path):
    # `checkpoint_format: dcp` in a --config_path file, not in the flags: the line checks what LeRobot resolved.
    flags = ["--dataset.repo_id=x/y", *TINY_ACT, f"--output_dir={tmp_path / 'out'}"]
    if os.environ.get(LEROBOT_LINE, "0.6") == "0.6":  # 0.6.x has no such setting: it cannot save dcp at all
        with pytest.raises(UsageError, match="checkpoint_format"):
            lerobot_api.parse_train_config([*flags, "--checkpoint_format=dcp"], False)
        return
    lerobot_api.parse_train_config([*flags, "--checkpoint_format=dcp"], False)._save_pretrained(tmp_path)
    cfg = lerobot_api.parse_train_config([f"--config_path={tmp_path / 'train_config.json'}"], False)
    with pytest.raises(UsageError, match=r"--checkpoint_format=dcp with --cluster.model_dir=/opt/ml/model"):
        installed_line().check_config(cfg, ClusterConfig(model_dir="/opt/ml/model").line())


def global_names(code) -> set[str]:
    """The names a function (and the functions nested in it) looks up at run time."""
    nested = [global_names(const) for const in code.co_consts if inspect.iscode(const)]
    return set(code.co_names).union(*nested)


def test_train_looks_up_the_hooked_functions_per_call():
    # Wrapping works only while `train` resolves these through its module's globals at call time.
    looked_up = global_names(inspect.unwrap(lerobot_train.train).__code__)
    hooked = {"update_policy", "should_save_checkpoint", "save_checkpoint", "update_last_checkpoint", "reset_averages"}
    assert hooked <= looked_up
    assert list(inspect.signature(lerobot_train.save_checkpoint).parameters)[0] == "checkpoint_dir"
    assert list(inspect.signature(lerobot_train.should_save_checkpoint).parameters) == [
        "step",
        "save_freq",
        "total_steps",
    ]
    assert list(inspect.signature(lerobot_train.update_last_checkpoint).parameters) == ["checkpoint_dir"]
    assert list(inspect.signature(lerobot_train.update_policy).parameters)[:2] == ["train_metrics", "policy"]


class Seen(LoopHooks):
    def __init__(self):
        self.steps, self.losses, self.saved, self.written, self.logged_losses = [], [], [], [], {}

    def after_step(self, step, loss, policy):
        self.steps.append(step)
        self.losses.append(loss)

    def logged(self, step, metrics):
        self.logged_losses[step] = metrics["loss"]

    def save_now(self, step):
        return step == 2

    def checkpoint_written(self, step_dir):
        self.written.append(step_dir.name)

    def checkpoint_saved(self, step_dir):
        assert (step_dir / lerobot_api.PRETRAINED_MODEL / "train_config.json").is_file()  # whole when we hear of it
        self.saved.append(step_dir.name)


@pytest.mark.slow  # trains LeRobot's own loop in this process
def test_hooks_see_every_step_and_checkpoint_of_lerobots_own_loop(dataset, tmp_path, capfd, caplog):
    out = tmp_path / "out"
    args = [
        *dataset_flags(dataset),
        *TINY_ACT,
        *COMMON,
        "--steps=3",
        "--save_freq=100",
        "--log_freq=1",
        f"--output_dir={out}",
    ]
    cfg = lerobot_api.parse_train_config(args, validate=True)
    seen = Seen()
    with lerobot_api.hooked([seen]):
        installed_line().train(cfg, args, Placement(rank=0, world_size=1, use_gpu=False, mixed_precision="auto"))
    assert seen.steps == [1, 2, 3]
    # What a logged step hands the hooks is what LeRobot printed for it.
    printed = logged_losses(capfd.readouterr().err + caplog.text)
    assert sorted(printed) == sorted(seen.logged_losses) == [1, 2, 3]
    assert all(f"{seen.logged_losses[step]:.3f}" == f"{printed[step]:.3f}" for step in printed)
    assert seen.saved == seen.written == ["000002", "000003"]  # ours at 2 (off --save_freq), LeRobot's final at 3
    assert lerobot_api.newest_checkpoint(out).name == "000003"
    assert lerobot_api.resumed_step(lerobot_api.resume_flags(out, "000002", 3)) == 2
    assert lerobot_train.update_policy.__name__ == "update_policy"  # unhooked again
    assert lerobot_train.update_policy.__module__ == "lerobot.scripts.lerobot_train"


def test_the_resumed_step_is_read_through_lerobots_last_link(tmp_path):
    # LeRobot's documented resume names checkpoints/last/pretrained_model/train_config.json.
    checkpoints = lerobot_api.checkpoints_dir(tmp_path)
    (checkpoints / "000040" / lerobot_api.PRETRAINED_MODEL).mkdir(parents=True)
    (checkpoints / lerobot_api.LAST).symlink_to("000040")
    last = checkpoints / lerobot_api.LAST / lerobot_api.PRETRAINED_MODEL / "train_config.json"
    assert lerobot_api.resumed_step(["--resume=true", f"--config_path={last}"]) == 40
    with pytest.raises(UsageError, match="--config_path=cfg.json: not a LeRobot checkpoint's config"):
        lerobot_api.resumed_step(["--resume=true", "--config_path=cfg.json"])
