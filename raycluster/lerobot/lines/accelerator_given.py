"""LeRobot 0.6.x: ``train(cfg, accelerator)`` runs on an Accelerator we build over Ray Train's process group."""

from __future__ import annotations

from raycluster.errors import UsageError
from raycluster.lerobot.api import lerobot_argv
from raycluster.lerobot.lines import LineSettings, Placement


def mixed_precision(cfg, use_gpu: bool) -> str | None:
    """LeRobot's own rule (``lerobot_train.train`` builds its Accelerator this way): ``policy.dtype``
    if the policy has one, else ``policy.use_amp`` with torch's autocast dtype for the device."""
    import torch

    policy_cfg = cfg.trainable_config
    if hasattr(policy_cfg, "dtype"):
        return {"bfloat16": "bf16", "float16": "fp16", "float32": "no"}.get(policy_cfg.dtype)
    if getattr(policy_cfg, "use_amp", False):
        dtype = torch.get_autocast_dtype("cuda" if use_gpu else "cpu")
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    return None


def build_accelerator(cfg, use_gpu: bool, precision: str):
    """The Accelerator LeRobot would build for ``cfg``, on the process group Ray Train made.

    ``cpu=True`` is required on CPU: without it every rank believes it is alone (no DDP, every
    rank saves) and nothing errors. ``precision="auto"`` keeps LeRobot's own choice.
    """
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    return Accelerator(
        step_scheduler_with_optimizer=False,
        mixed_precision=mixed_precision(cfg, use_gpu) if precision == "auto" else precision,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        cpu=not use_gpu,
    )


class AcceleratorGiven:
    name = "LeRobot 0.6.x (train(cfg, accelerator))"
    saves_on_every_rank = False

    def plan_args(self, args: list[str], cluster: LineSettings) -> list[str]:
        if cluster.sharding != "none":
            raise UsageError(
                f"--cluster.sharding={cluster.sharding} needs LeRobot main (train(cfg) with --parallelism.*); "
                "the installed LeRobot 0.6.x trains with DDP only: drop the flag or install LeRobot main"
            )
        return args

    def check_config(self, cfg, cluster: LineSettings) -> None:
        """0.6.x saves safetensors only: nothing to refuse."""

    def worker_args(self, args: list[str], hosts: list[str], sharding: str) -> list[str]:
        return args

    def precision(self, cfg, placement: Placement) -> str:
        if placement.mixed_precision != "auto":
            return placement.mixed_precision
        return mixed_precision(cfg, placement.use_gpu) or "no"

    def train(self, cfg, args: list[str], placement: Placement) -> None:
        from lerobot.scripts import lerobot_train

        accelerator = build_accelerator(cfg, placement.use_gpu, placement.mixed_precision)
        if accelerator.num_processes != placement.world_size or accelerator.process_index != placement.rank:
            raise RuntimeError(
                f"accelerate sees rank {accelerator.process_index}/{accelerator.num_processes}, "
                f"Ray Train rank {placement.rank}/{placement.world_size}: the process group was not shared"
            )
        with lerobot_argv(args):
            lerobot_train.train(cfg, accelerator=accelerator)
