"""What each Ray Train worker runs: an Accelerator over Ray's process group, then LeRobot's own ``train``."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import ray.train
import torch.distributed as dist

from raycluster.checkpoints import send_directory
from raycluster.checkpoints import send_directory
from raycluster.training.lerobot_config import checkpoints_dir, flag_value, lerobot_argv, parse_train_config
from raycluster.training.recorder import StepRecorder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    lerobot_args: list[str]
    use_gpu: bool
    mixed_precision: str
    journal: object
    """RunJournal actor handle."""
    model_keeper: object | None = None
    """CheckpointKeeper that receives the final pretrained_model, when --cluster.model_dir is set."""


def lerobot_mixed_precision(cfg, use_gpu: bool) -> str | None:
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


def build_accelerator(cfg, use_gpu: bool, mixed_precision: str):
    """The Accelerator LeRobot would build for ``cfg``, on the process group Ray Train made.

    ``cpu=True`` is required on CPU: without it every rank believes it is alone (no DDP, every
    rank saves) and nothing errors. ``mixed_precision="auto"`` keeps LeRobot's own choice.
    """
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    if mixed_precision == "auto":
        mixed_precision = lerobot_mixed_precision(cfg, use_gpu)
    return Accelerator(
        step_scheduler_with_optimizer=False,
        mixed_precision=mixed_precision,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        cpu=not use_gpu,
    )


def newest_checkpoint(output_dir: Path) -> Path | None:
    last = checkpoints_dir(output_dir) / "last"
    return last.resolve() if last.exists() else None


def start_args(args: list[str], output_dir: Path, attempt: int) -> tuple[list[str], int | None]:
    """Rank 0's choice of flags for this attempt, and the step it resumes from.

    A restarted worker group resumes from the newest checkpoint this run wrote; one that failed
    before any checkpoint starts over, with the failed attempt's output moved aside, not deleted.
    """
    if attempt == 1:
        return args, None
    ckpt = newest_checkpoint(output_dir)
    if ckpt is None:
        if output_dir.exists():
            aside = output_dir.with_name(f"{output_dir.name}.attempt{attempt - 1}")
            shutil.move(output_dir, aside)
            log.warning("attempt %d: no checkpoint yet; moved %s aside to %s", attempt, output_dir, aside)
        return args, None
    config_path = ckpt / "pretrained_model" / "train_config.json"
    log.info("attempt %d: resuming from %s", attempt, ckpt)
    return ["--resume=true", f"--config_path={config_path}"], int(ckpt.name)


def resumed_step(args: list[str]) -> int | None:
    if (flag_value(args, "resume") or "").lower() != "true":
        return None
    config_path = flag_value(args, "config_path")
    return int(Path(config_path).parent.parent.name) if config_path else None


def train_loop_per_worker(config: dict) -> dict | None:
    from lerobot.scripts import lerobot_train

    worker = WorkerConfig(**config)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()

    cfg = parse_train_config(worker.lerobot_args, validate=False)
    output_dir = Path(cfg.output_dir)
    # Rank 0 alone decides (its node holds the checkpoints); every rank then runs the same flags.
    decision = [None]
    if rank == 0:
        attempt = ray.get(worker.journal.attempt_started.remote())
        decision = [start_args(worker.lerobot_args, output_dir, attempt)]
    dist.broadcast_object_list(decision, src=0)
    args, resumed_from = decision[0]
    if resumed_from is None:
        resumed_from = resumed_step(args)
    if args != worker.lerobot_args:
        cfg = parse_train_config(args, validate=False)

    accelerator = build_accelerator(cfg, worker.use_gpu, worker.mixed_precision)
    if accelerator.num_processes != world_size or accelerator.process_index != rank:
        raise RuntimeError(
            f"accelerate sees rank {accelerator.process_index}/{accelerator.num_processes}, "
            f"Ray Train rank {rank}/{world_size}: the process group was not shared"
        )
    recorder = StepRecorder(
        samples_per_step=cfg.batch_size * world_size,
        report_every=max(cfg.log_freq, 1),
        report=ray.train.report,
    )
    backend = dist.get_backend()
    started = time.perf_counter()
    with recorder.observing(lerobot_train), lerobot_argv(args):
        lerobot_train.train(cfg, accelerator=accelerator)
    if rank != 0:
        return None
    if worker.model_keeper is not None:
        final = newest_checkpoint(output_dir) / "pretrained_model"
        send_directory(worker.model_keeper, final, "pretrained_model")
    saved = sorted(int(p.name) for p in checkpoints_dir(output_dir).glob("[0-9]*") if p.is_dir())
    return {
        "world_size": world_size,
        "num_processes": accelerator.num_processes,
        "backend": backend,
        "policy_wrapper": recorder.policy_class,
        "mixed_precision": accelerator.mixed_precision,
        "final_step": recorder.last_step,
        "samples_per_s": recorder.samples_per_s,
        "loss_first": recorder.loss_first,
        "loss_last": recorder.loss_last,
        "checkpoints": saved,
        "resumed_from": resumed_from,
        "train_s": time.perf_counter() - started,
    }
