"""Test job, staged with `raycluster sim --include`: a sharded model (FSDP2 over gloo, real DCP shards, each rank's
written on its own host) checkpointed at every step through raycluster's own shipping, part stores and keeper,
as LeRobot main's collective save is under `raycluster train` (which needs GPUs to shard), then resumed.

One rank per host. Each step adds ``step / 1000`` to every weight, so the weights of step s are known on every rank. Flags:
``--kill_at=K``: attempt 1's rank on the last host SIGKILLs itself after its shards of step K are written and
before its part is shipped (the part never comes; Ray Train restarts the group). ``--kill_store_at=K``: attempt 2's
lead rank on the last host kills its host's part store once step K is saved (Ray starts it again). ``--step_s``:
pause per step.
``--resume_only``: load the newest complete checkpoint and check it, nothing more. ``--payload_mb``: each rank
also saves that much of optimizer-like state. ``--wait_each``: rank 0 waits until each checkpoint is complete and
prints how long it took (the benchmark).
"""

import argparse
import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

# Run from the job's code channel, not an install.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray  # noqa: E402
import ray.train  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from ray.train import FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from ray.train.torch import TorchTrainer  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

from raycluster.checkpoints.keeper import keeper_and_part_stores  # noqa: E402
from raycluster.checkpoints.part_store import local_part_store  # noqa: E402
from raycluster.lerobot.api import checkpoints_dir, loop_wrappers  # noqa: E402
from raycluster.logs import configure  # noqa: E402
from raycluster.training.journal import RunJournal  # noqa: E402
from raycluster.training.worker.loop import rank_hosts  # noqa: E402
from raycluster.training.worker.resume import agree_on_start  # noqa: E402
from raycluster.training.worker.shipping import checkpoint_shipping, outcome  # noqa: E402

SHARDS = Path("pretrained_model") / "pytorch_model_fsdp_0"  # where LeRobot main puts a sharded model


def picked(keeper, name: str, timeout_s: float = 120.0) -> None:
    """Until the keeper has picked ``name`` for every host to stage (bounded), then a moment for them to stage it:
    the doomed rank dies with the other hosts' parts of its step staged, which its restart must give up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and getattr(ray.get(keeper.pick.remote()), "name", None) != name:
        time.sleep(0.1)
    time.sleep(2)


def sharded_model(step: int) -> torch.nn.Module:
    """The model as it is after ``step`` steps (0: freshly initialised)."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(*(torch.nn.Linear(64, 64) for _ in range(3)))
    with torch.no_grad():
        for done in range(1, step + 1):  # the very additions training makes, so the bytes agree too
            for p in model.parameters():
                p.add_(done / 1000)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def digest(model: torch.nn.Module) -> str:
    every = hashlib.sha256()
    for p in model.parameters():
        every.update(p.full_tensor().detach().numpy().tobytes())
    return every.hexdigest()[:16]


def save(step_dir: Path, model, rank: int, attempt: int, payload_mb: int) -> None:
    """What LeRobot main's save does on every rank: its DCP shards, the main process's files, then (rank 0)
    the step written and ``last`` pointed at it."""
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(step_dir / SHARDS))
    state = step_dir / "training_state"
    state.mkdir(parents=True, exist_ok=True)
    (state / f"attempt_rank{rank}.txt").write_text(str(attempt))  # which attempt wrote each rank's part
    if payload_mb:
        (state / f"optimizer_rank{rank}.bin").write_bytes(os.urandom(payload_mb * 2**20))
    if rank == 0:
        (step_dir / "pretrained_model" / "config.json").write_text('{"type": "test"}')


def lerobot_update_last_checkpoint():
    from lerobot.scripts import lerobot_train

    return lerobot_train.update_last_checkpoint


def loop(config: dict) -> dict | None:
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    # LeRobot's own `last` link, which rank 0 alone updates: imported there only, before the first collective,
    # since importing LeRobot costs a process about 8 s of CPU that 8 ranks would pay for one small function.
    update_last = lerobot_update_last_checkpoint() if rank == 0 else None
    hosts = rank_hosts(ray.util.get_node_ip_address(), rank, world)
    # Where the attempt starts, as training decides it: the checkpoint fetched onto every host from the hosts
    # that hold its parts, this host's saves of a failed attempt dropped.
    keeper, part_store = config["checkpoint_keeper"], local_part_store(config["part_stores"])
    cfg = SimpleNamespace(output_dir=config["output_dir"], steps=config["steps"])
    start = agree_on_start([], keeper, part_store, config["journal"], cfg, rank, context.get_local_rank(), world)
    step, attempt = start.resumed_from or 0, start.attempt
    model = sharded_model(step)
    if step:
        step_dir = checkpoints_dir(Path(config["output_dir"])) / f"{step:06d}"
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=str(step_dir / SHARDS))  # reshards when the world size changed
        set_model_state_dict(model, state["model"])
    loaded, expected = [None] * world, digest(sharded_model(step))  # both collectives: on every rank
    dist.all_gather_object(loaded, digest(model))
    if rank == 0:
        print(f"attempt {attempt} on {world} ranks resumed from step {step}: every rank loaded the weights of "
              f"step {step}: {set(loaded) == {expected}}", flush=True)  # fmt: skip
    if config["resume_only"]:
        return None
    shipping = checkpoint_shipping(
        config["part_stores"], config["checkpoint_keeper"], rank, hosts, attempt, every_rank_saves=True
    )
    hooks = [shipping[1]] if shipping else []
    doomed = attempt == 1 and hosts.index(hosts[-1]) == rank  # the lowest rank on the last host
    # LeRobot's own `update_last_checkpoint`; its save replaced by this job's, both wrapped as in training.
    saves = {"save_checkpoint": lambda step_dir: save(Path(step_dir), model, rank, attempt, config["payload_mb"]),
             "update_last_checkpoint": update_last}  # fmt: skip
    wrapped = loop_wrappers(saves, hooks)
    timings = {}
    while step < config["steps"]:
        step += 1
        with torch.no_grad():
            for p in model.parameters():
                p.add_(step / 1000)
        step_dir = checkpoints_dir(Path(config["output_dir"])) / f"{step:06d}"
        if doomed and step == config["kill_at"]:
            saves["save_checkpoint"](step_dir)  # this rank's shards are written, and never shipped
            picked(config["checkpoint_keeper"], step_dir.name)  # ... while every other host ships its part
            print(f"rank {rank}: killing myself before my host's part of step {step} is shipped", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        wrapped["save_checkpoint"](step_dir)
        if rank == 0:
            wrapped["update_last_checkpoint"](step_dir)
            print(f"attempt {attempt}: step {step} saved", flush=True)
        dist.barrier()
        saved = time.monotonic()
        if attempt == 2 and step == config["kill_store_at"] and shipping and hosts.index(hosts[-1]) == rank:
            print(f"rank {rank}: killing my host's part store after step {step}", flush=True)
            ray.kill(part_store, no_restart=False)  # its process dies, as the OOM killer would end it
        if config["wait_each"] and rank == 0:
            assert outcome(config["checkpoint_keeper"], step_dir.name, poll_s=0.01) is None, (
                f"checkpoint {step} not published"
            )
            timings[step] = time.monotonic() - saved
        time.sleep(config["step_s"])
    if shipping:
        shipping[0].drain()
    return {"timings": timings, "failed": shipping[0].failed if shipping else {}} if rank == 0 else None


if __name__ == "__main__":
    configure()
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint_dir", default="/opt/ml/checkpoints/lerobot")
    parser.add_argument("--staging_dir", default="/opt/ml/raycluster-staging")
    parser.add_argument("--output_dir", default="/tmp/raycluster/sharded")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--kill_at", type=int, default=0)
    parser.add_argument("--kill_store_at", type=int, default=0)
    parser.add_argument("--step_s", type=float, default=0.0)
    parser.add_argument("--payload_mb", type=int, default=0)
    parser.add_argument("--resume_only", type=lambda v: str(v).lower() == "true", default=False)
    parser.add_argument("--wait_each", type=lambda v: str(v).lower() == "true", default=False)
    args = parser.parse_args()
    ray.init()
    keeper, part_stores = keeper_and_part_stores(args.checkpoint_dir, 0, args.staging_dir)
    config = {**vars(args), "checkpoint_keeper": keeper, "part_stores": part_stores, "journal": RunJournal.remote()}
    trainer = TorchTrainer(
        loop,
        train_loop_config=config,
        scaling_config=ScalingConfig(
            num_workers=args.workers, resources_per_worker={"CPU": 1}, placement_strategy="STRICT_SPREAD"
        ),
        run_config=RunConfig(name="sharded-checkpoints", failure_config=FailureConfig(max_failures=1)),
    )
    result = trainer.fit().return_value
    if result is not None:
        for step, seconds in sorted(result["timings"].items()):
            print(f"checkpoint {step}: complete {seconds:.2f}s after its save", flush=True)
        print(f"failed uploads: {result['failed']}", flush=True)
    print(f"published: {ray.get(keeper.complete_names.remote())}", flush=True)
    print(f"not published: {ray.get(keeper.failures_by_name.remote())}", flush=True)
