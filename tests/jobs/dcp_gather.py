"""Test job, staged with `raycluster sim --include`: sharded checkpoints written on several hosts, gathered by
the checkpoint keeper into one complete checkpoint, then loaded back into a sharded model on every rank.

What LeRobot main does on GPUs (FSDP2; a collective save where every rank writes its own DCP shard into its
own host's output_dir), here with torch's own FSDP2 over gloo on CPU, through raycluster's shipping.
"""

import argparse
import sys
from pathlib import Path

# Run from the job's code channel, not an install.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ray  # noqa: E402
import ray.train  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from ray.train import ScalingConfig  # noqa: E402
from ray.train.torch import TorchTrainer  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

from raycluster.checkpoints.keeper import keeper_on_this_node  # noqa: E402
from raycluster.checkpoints.transfer import Shipper, fetch_directory  # noqa: E402
from raycluster.logs import configure  # noqa: E402
from raycluster.training.worker import host_part, rank_hosts  # noqa: E402

NAME = "000001"
SHARDS = Path("pretrained_model") / "pytorch_model_fsdp_0"  # where LeRobot main puts a sharded model


def sharded_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(*(torch.nn.Linear(32, 32) for _ in range(3)))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(
        torch.equal(x.full_tensor(), y.full_tensor()) for x, y in zip(a.parameters(), b.parameters(), strict=True)
    )


def loop(config: dict) -> list[dict] | None:
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    hosts = rank_hosts(ray.util.get_node_ip_address(), rank, world)
    model = sharded_model(seed=1)
    step_dir = Path(config["output_dir"]) / "checkpoints" / NAME
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=str(step_dir / SHARDS))
    failed = {}
    if (part := host_part(hosts, rank)) is not None:  # as the workers ship a checkpoint LeRobot main saved
        shipper = Shipper(config["keeper"], None, *part)
        shipper.submit(step_dir)
        shipper.drain()
        failed = shipper.failed
    dist.barrier()
    restored = Path(config["output_dir"]) / "restored" / NAME
    if context.get_local_rank() == 0:  # every host gets the whole checkpoint, as a resume does
        fetch_directory(config["keeper"], NAME, restored)
    dist.barrier()
    fresh = sharded_model(seed=2)
    same_before = same_weights(model, fresh)  # false: the load below has everything to restore
    state = {"model": get_model_state_dict(fresh)}
    dcp.load(state, checkpoint_id=str(restored / SHARDS))
    set_model_state_dict(fresh, state["model"])
    mine = {"rank": rank, "host": hosts[rank], "same": same_weights(model, fresh) and not same_before, "failed": failed}
    every = [None] * world
    dist.all_gather_object(every, mine)
    return every if rank == 0 else None


if __name__ == "__main__":
    configure()
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint_dir", default="/opt/ml/checkpoints/lerobot")
    parser.add_argument("--staging_dir", default="/opt/ml/raycluster-staging")
    parser.add_argument("--output_dir", default="/tmp/raycluster/dcp")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    ray.init()
    keeper = keeper_on_this_node(args.checkpoint_dir, staging_dir=args.staging_dir)
    trainer = TorchTrainer(
        loop,
        train_loop_config={"keeper": keeper, "output_dir": args.output_dir},
        scaling_config=ScalingConfig(num_workers=args.workers, resources_per_worker={"CPU": 1}),
    )
    ranks = trainer.fit().return_value
    for r in ranks:
        print(f"rank {r['rank']} on {r['host']}: weights restored: {r['same']}, failed uploads: {r['failed']}")
    published = ray.get(keeper.complete_names.remote())
    print(f"published: {published}")
    sys.exit(0 if all(r["same"] for r in ranks) and published == [NAME] else 1)
