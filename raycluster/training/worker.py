"""What each Ray Train worker runs: an Accelerator over Ray's process group, then LeRobot's own ``train``."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ray.train
import torch.distributed as dist

from raycluster.checkpoints.transfer import Shipper, fetch_directory, send_directory
from raycluster.training.interrupt import Interrupted, StopAgreement
from raycluster.training.lerobot_config import checkpoints_dir, flag_value, lerobot_argv, parse_train_config
from raycluster.training.recorder import StepRecorder

log = logging.getLogger(__name__)

PUBLISH_SETTLE_S = 600.0
"""How long a restart waits for the failed attempt's in-flight publish before resuming without it."""


@dataclass(frozen=True)
class WorkerConfig:
    lerobot_args: list[str]
    use_gpu: bool
    mixed_precision: str
    journal: object
    """RunJournal actor handle."""
    checkpoint_keeper: object | None = None
    """CheckpointKeeper owning --cluster.checkpoint_dir, when set."""
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


def final_checkpoint(worker: WorkerConfig, output_dir: Path, published: list[str]) -> Path | None:
    """The newest checkpoint of the run: this node's ``last``, unless the keeper holds a newer complete
    one (``published``: a restart resumed past what this node saved), which is then fetched here first."""
    local = newest_checkpoint(output_dir)
    if not published or (local is not None and int(local.name) >= int(published[-1])):
        return local
    name = published[-1]
    target = checkpoints_dir(output_dir) / name
    fetch_directory(worker.checkpoint_keeper, name, target)
    return target


def resume_flags(output_dir: Path, step_dir: str, steps: int) -> list[str]:
    config_path = checkpoints_dir(output_dir) / step_dir / "pretrained_model" / "train_config.json"
    return ["--resume=true", f"--config_path={config_path}", f"--output_dir={output_dir}", f"--steps={steps}"]


@dataclass(frozen=True)
class Start:
    """How an attempt starts, decided by rank 0 and broadcast: the flags, and what it resumes from."""

    args: list[str]
    resumed_from: int | None = None
    from_keeper: str | None = None
    """A checkpoint every node must fetch from the keeper before LeRobot resumes from it."""


def resume_source(keeper_step: int | None, local_steps: list[int | None], attempt: int) -> tuple[str, int] | None:
    """Where an attempt resumes from: ``("keeper", step)``, ``("local", step)`` or None (start as asked).

    Only a checkpoint every rank can reach will do: the keeper's (each node fetches it), or a ``last`` that
    every rank sees on its own node (one node, or a shared filesystem), which then needs no fetch. A
    first attempt resumes from the keeper alone (a restarted job); local files are only this run's own."""
    shared = local_steps[0] if attempt > 1 and len(set(local_steps)) == 1 else None
    if shared is not None and (keeper_step is None or shared >= keeper_step):
        return "local", shared
    return ("keeper", keeper_step) if keeper_step is not None else None


def decide_start(worker: WorkerConfig, cfg, attempt: int, local_steps: list[int | None]) -> Start:
    """The flags of this attempt (see ``resume_source``). A failed attempt's output with nothing to resume
    from is moved aside, not deleted."""
    output_dir = Path(cfg.output_dir)
    kept = None
    if worker.checkpoint_keeper is not None:
        # A restart can come while the failed attempt's last upload is still being published: wait for it.
        kept = ray.get(worker.checkpoint_keeper.newest_complete.remote(settle_s=PUBLISH_SETTLE_S))
    source = resume_source(int(kept) if kept else None, local_steps, attempt)
    if source is not None and source[0] == "keeper":
        log.info("attempt %d: resuming from the keeper's checkpoint %s", attempt, kept)
        return Start(resume_flags(output_dir, kept, cfg.steps), source[1], kept)
    if source is not None:
        name = newest_checkpoint(output_dir).name  # rank 0's own `last`, which every rank sees too
        log.info("attempt %d: resuming from %s, which every rank has on its node", attempt, name)
        return Start(resume_flags(output_dir, name, cfg.steps), source[1])
    if attempt == 1:
        return Start(worker.lerobot_args, resumed_step(worker.lerobot_args))
    if output_dir.exists():
        aside = output_dir.with_name(f"{output_dir.name}.attempt{attempt - 1}")
        shutil.move(output_dir, aside)
        log.warning("attempt %d: no checkpoint every rank can reach; moved %s aside to %s", attempt, output_dir, aside)
    return Start(worker.lerobot_args)


def resumed_step(args: list[str]) -> int | None:
    if (flag_value(args, "resume") or "").lower() != "true":
        return None
    config_path = flag_value(args, "config_path")
    return int(Path(config_path).parent.parent.name) if config_path else None


@contextlib.contextmanager
def shipping(lerobot_train, shipper: Shipper | None) -> Iterator[None]:
    """Hand every checkpoint LeRobot completes to the shipper: ``update_last_checkpoint`` runs on the
    main process right after ``save_checkpoint`` returns, when the directory is whole."""
    if shipper is None:
        yield
        return
    original = lerobot_train.update_last_checkpoint

    def shipped(checkpoint_dir):
        result = original(checkpoint_dir)
        shipper.submit(Path(checkpoint_dir))
        return result

    lerobot_train.update_last_checkpoint = shipped
    try:
        yield
    finally:
        lerobot_train.update_last_checkpoint = original


def train_loop_per_worker(config: dict) -> dict | None:
    from lerobot.scripts import lerobot_train

    worker = WorkerConfig(**config)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    log.info(
        "raycluster worker rank %d of %d, pid %d, node %s",
        rank,
        world_size,
        os.getpid(),
        ray.util.get_node_ip_address(),
    )
    cfg = parse_train_config(worker.lerobot_args, validate=False)
    # Rank 0 decides from the keeper and what every rank finds on its own node; all then run the same flags.
    local = newest_checkpoint(Path(cfg.output_dir))
    local_steps: list[int | None] = [None] * world_size
    dist.all_gather_object(local_steps, int(local.name) if local is not None else None)
    decision = [None]
    if rank == 0:
        decision = [decide_start(worker, cfg, ray.get(worker.journal.attempt_started.remote()), local_steps)]
    dist.broadcast_object_list(decision, src=0)
    start: Start = decision[0]
    if start.from_keeper and context.get_local_rank() == 0:
        fetch_directory(
            worker.checkpoint_keeper, start.from_keeper, checkpoints_dir(Path(cfg.output_dir)) / start.from_keeper
        )
    dist.barrier()
    args = start.args
    if args != worker.lerobot_args:
        cfg = parse_train_config(args, validate=False)
    output_dir = Path(cfg.output_dir)

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
    shipper = Shipper(worker.checkpoint_keeper) if rank == 0 and worker.checkpoint_keeper is not None else None
    agreement = StopAgreement(worker.journal, accelerator.device, polls=rank == 0)
    interrupted_at = None
    try:
        with (
            recorder.observing(lerobot_train),
            agreement.watching(lerobot_train),
            shipping(lerobot_train, shipper),
            lerobot_argv(args),
        ):
            lerobot_train.train(cfg, accelerator=accelerator)
    except Interrupted as stop:
        interrupted_at = stop.step
        log.info("rank %d: stopped on request after step %d", rank, stop.step)
    if rank != 0:
        return None
    if shipper is not None:
        shipper.drain()
    lost, published = None, []
    if worker.checkpoint_keeper is not None:
        published = ray.get(worker.checkpoint_keeper.complete_names.remote())  # one manifest check of each
        saved = [int(name) for name in published]
        newest = newest_checkpoint(output_dir)
        if newest is not None and int(newest.name) not in saved:
            lost = (
                f"checkpoint {newest.name} was not published to the checkpoint root: "
                f"{shipper.failed.get(newest.name, 'its upload never completed')}"
            )
    else:
        saved = sorted(int(p.name) for p in checkpoints_dir(output_dir).glob("[0-9]*") if p.is_dir())
    if worker.model_keeper is not None and interrupted_at is None:  # an interrupted run has no final model
        final = final_checkpoint(worker, output_dir, published)
        if final is None:
            log.warning("no checkpoint was saved (--save_checkpoint=false?): nothing to publish to the model dir")
        else:
            send_directory(worker.model_keeper, final / "pretrained_model", "pretrained_model")
    return {
        "world_size": world_size,
        "num_processes": accelerator.num_processes,
        "backend": backend,
        "policy_wrapper": recorder.policy_class,
        "mixed_precision": accelerator.mixed_precision,
        "final_step": recorder.last_step or start.resumed_from,
        "samples_per_s": recorder.samples_per_s,
        "loss_first": recorder.loss_first,
        "loss_last": recorder.loss_last,
        "checkpoints": saved,
        "resumed_from": start.resumed_from,
        "uploads_skipped": shipper.skipped if shipper else [],
        "uploads_failed": shipper.failed if shipper else {},
        "lost": lost,
        "interrupted_at": interrupted_at,
        "train_s": time.perf_counter() - started,
    }
