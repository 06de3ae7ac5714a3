"""What each worker sends to the curve keeper: LeRobot's own logged numbers (rank 0), this worker's
hardware at every logged step, and the events it sees. Fire-and-forget calls: never a wait in the loop."""

from __future__ import annotations

from pathlib import Path

import psutil
import torch

from raycluster.lerobot.api import LoopHooks

GB = 1024**3


def hardware(rank: int, process: psutil.Process, device: torch.device) -> dict[str, float]:
    """GPU utilization and memory on a GPU, else this process's CPU use and resident memory."""
    prefix = f"worker{rank}"
    if device.type == "cuda":
        sample = {f"{prefix}/gpu_mem_gb": torch.cuda.max_memory_allocated(device) / GB}
        try:
            sample[f"{prefix}/gpu_util_percent"] = float(torch.cuda.utilization(device))
        except Exception:  # torch reads utilization through NVML (nvidia-ml-py), which may be absent
            pass
        return sample
    return {f"{prefix}/cpu_percent": process.cpu_percent(), f"{prefix}/rss_gb": process.memory_info().rss / GB}


class CurveHooks(LoopHooks):
    def __init__(self, keeper, rank: int, device: torch.device):
        self.keeper, self.rank, self.device = keeper, rank, device
        self.process = psutil.Process()
        self.process.cpu_percent()  # the first reading starts psutil's interval

    def logged(self, step: int, metrics: dict[str, float]) -> None:
        if self.rank == 0:
            self.keeper.log.remote(step, {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))})
        self.keeper.log.remote(step, hardware(self.rank, self.process, self.device))

    def checkpoint_saved(self, step_dir: Path) -> None:
        if self.rank == 0:
            self.keeper.mark.remote(int(step_dir.name), "checkpoint")
