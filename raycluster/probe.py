"""An all-reduce benchmark across every worker of the cluster (NCCL on GPUs, gloo on CPU), and which
transport NCCL really used, read from NCCL's own log lines."""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from raycluster.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26)


@dataclass(frozen=True)
class Transport:
    name: str
    """efa, ib, socket, or unknown"""
    evidence: str | None

    @property
    def fell_back_to_sockets(self) -> bool:
        return self.name == "socket"


def nccl_transport(lines: list[str]) -> Transport:
    """What NCCL_DEBUG=INFO says it selected. EFA shows as ``NET/OFI Selected provider is efa``; a plain
    ``NET/Socket`` means every byte crosses the kernel's TCP stack."""
    for line in lines:
        if m := re.search(r"NET/OFI Selected provider is (\w+)", line):
            return Transport("efa" if m.group(1) == "efa" else m.group(1), line.strip())
    for line in lines:
        if re.search(r"NET/IB ?: ?Using|Using network IB", line):
            return Transport("ib", line.strip())
    for line in lines:
        if re.search(r"NET/Socket ?: ?Using|Using network Socket", line):
            return Transport("socket", line.strip())
    return Transport("unknown", None)


def bus_bandwidth(size_bytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algorithm bandwidth, bus bandwidth) in GB/s, as nccl-tests defines them for all-reduce."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (world_size - 1) / world_size


def probe_worker(config: dict) -> dict | None:
    import ray.train
    import torch
    import torch.distributed as dist

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if config["use_gpu"] else torch.device("cpu")
    rows = []
    for size in config["sizes"]:
        tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
        for _ in range(2):
            dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(config["iters"]):
            dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - started) / config["iters"]
        algbw, busbw = bus_bandwidth(size, seconds, world)
        rows.append({"bytes": size, "us": seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw})
    if rank != 0:
        return None
    debug_file = os.environ.get("NCCL_DEBUG_FILE", "")
    lines = []
    for path in Path(debug_file).parent.glob("nccl-*.log") if debug_file else []:
        lines += path.read_text(errors="replace").splitlines()
    return {"backend": dist.get_backend(), "world_size": world, "rows": rows, "nccl_lines": lines}


def run_probe(num_workers: int, use_gpu: bool, sizes=DEFAULT_SIZES, iters: int = 10) -> dict:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    env = {}
    if use_gpu:
        # Rank 0's own log file: NCCL's lines tell which transport it picked.
        debug_dir = Path(tempfile.mkdtemp(prefix="nccl-probe-"))
        env = {
            "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "INFO"),
            "NCCL_DEBUG_SUBSYS": "INIT,NET",
            "NCCL_DEBUG_FILE": str(debug_dir / "nccl-%h-%p.log"),
        }
    trainer = TorchTrainer(
        probe_worker,
        train_loop_config={"sizes": list(sizes), "iters": iters, "use_gpu": use_gpu},
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu),
        run_config=RunConfig(name=f"nccl-probe-{int(time.time())}", worker_runtime_env={"env_vars": env}),
    )
    result = trainer.fit().return_value
    result["transport"] = nccl_transport(result.pop("nccl_lines")) if use_gpu else Transport("gloo/tcp", None)
    return result


def report(result: dict) -> str:
    lines = [
        f"all-reduce across {result['world_size']} workers, backend {result['backend']}",
        f"{'size':>12}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}",
    ]
    for row in result["rows"]:
        lines.append(f"{row['bytes']:>12}{row['us']:>12.1f}{row['algbw_gbps']:>12.3f}{row['busbw_gbps']:>12.3f}")
    transport: Transport = result["transport"]
    lines.append(f"transport: {transport.name}" + (f"  ({transport.evidence})" if transport.evidence else ""))
    if transport.fell_back_to_sockets:
        lines.append(
            "WARNING: NCCL FELL BACK TO SOCKETS: EFA is not in use; check FI_PROVIDER, the EFA "
            "security group rule and the aws-ofi-nccl plugin"
        )
    return "\n".join(lines)


def probe_cluster(argv: list[str], iters: int = 10) -> int:
    """``raycluster probe`` and ``jobs/nccl_probe.py``: the probe on the cluster ``--cluster.*`` names; exit
    code 1 when NCCL fell back to sockets."""
    from raycluster.cluster_config import split_cluster_args
    from raycluster.connect import check_capacity, ray_cluster

    try:
        cluster, rest = split_cluster_args(argv)
        if rest:
            raise UsageError(f"unknown arguments {rest}; the probe takes --cluster.* settings and --iters")
    except UsageError as exc:
        print(f"raycluster probe: error: {exc}", file=sys.stderr)
        return 2
    with ray_cluster(cluster.address):
        check_capacity(cluster.num_workers, cluster.use_gpu, cluster.cpus_per_worker)
        result = run_probe(cluster.num_workers, cluster.use_gpu, iters=iters)
    print(report(result))
    return 1 if result["transport"].fell_back_to_sockets else 0
