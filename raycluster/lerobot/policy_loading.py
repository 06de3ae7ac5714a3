"""A saved ``pretrained_model/`` loaded the way LeRobot loads one: its own train config, factories, processors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class LoadedPolicy:
    cfg: object
    """The ``TrainPipelineConfig`` the checkpoint was trained with (its ``train_config.json``)."""
    policy: object
    preprocessor: object
    postprocessor: object


def train_config(pretrained: Path, device: str):
    """The run's config as saved beside the weights, pointed at them, on ``device`` (as LeRobot's resume does)."""
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.policies import factory  # noqa: F401 (registers every policy's config: `act`, `diffusion`, ...)

    cfg = TrainPipelineConfig.from_pretrained(pretrained)
    cfg.policy.pretrained_path = pretrained
    cfg.policy.device = device
    return cfg


def load_policy(cfg, device: str, ds_meta=None) -> LoadedPolicy:
    """The policy in eval mode with its processors, from the dataset's metadata (held-out loss) or, without
    one, from the env's features (rollouts only: an evaluation host needs no copy of the dataset)."""
    from lerobot.policies.factory import make_policy, make_pre_post_processors

    if ds_meta is not None:
        policy = make_policy(cfg.policy, ds_meta=ds_meta, rename_map=cfg.rename_map)
    else:
        policy = make_policy(cfg.policy, env_cfg=cfg.env, rename_map=cfg.rename_map)
    policy.eval()
    # As LeRobot's eval_main: the processors saved with the weights, on this task's device.
    preprocessor, postprocessor = make_pre_post_processors(
        policy_cfg=cfg.policy,
        pretrained_path=str(cfg.policy.pretrained_path),
        preprocessor_overrides={
            "device_processor": {"device": device},
            "rename_observations_processor": {"rename_map": cfg.rename_map},
        },
    )
    return LoadedPolicy(cfg, policy, preprocessor, postprocessor)
