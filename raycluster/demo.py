"""The demo run: a small dataset made here, a tiny ACT trained by 2 Ray Train workers on CPU.

The same flags serve the tests and the benchmarks, so what the README shows is what is tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raycluster.dataset import SyntheticDatasetSpec

# A tiny ACT that trains in ~0.3 s a step on one CPU core, from scratch: no backbone weights
# from the Hub (there is no network), nothing pushed to it.
TINY_ACT = [
    "--policy.type=act",
    "--policy.device=cpu",
    "--policy.push_to_hub=false",
    "--policy.pretrained_backbone_weights=null",
    "--policy.dim_model=64",
    "--policy.n_heads=2",
    "--policy.dim_feedforward=128",
    "--policy.n_encoder_layers=1",
    "--policy.n_decoder_layers=1",
    "--policy.chunk_size=10",
    "--policy.n_action_steps=10",
]

TINY_DIFFUSION = [
    "--policy.type=diffusion",
    "--policy.device=cpu",
    "--policy.push_to_hub=false",
    "--policy.pretrained_backbone_weights=null",
    "--policy.down_dims=[32,64]",
    "--policy.horizon=8",
    "--policy.n_action_steps=4",
    "--policy.crop_shape=null",
    "--policy.num_train_timesteps=20",
    "--policy.use_group_norm=false",
]


@dataclass(frozen=True)
class DemoPlan:
    workdir: Path
    steps: int = 100
    num_workers: int = 2
    batch_size: int = 4
    save_freq: int = 50

    @property
    def dataset(self) -> SyntheticDatasetSpec:
        return SyntheticDatasetSpec(root=self.workdir / "dataset")

    def train_flags(self, output_dir: Path) -> list[str]:
        return [
            f"--cluster.num_workers={self.num_workers}",
            "--cluster.address=local",
            f"--dataset.repo_id={self.dataset.repo_id}",
            f"--dataset.root={self.dataset.root}",
            *TINY_ACT,
            f"--steps={self.steps}",
            f"--batch_size={self.batch_size}",
            f"--save_freq={self.save_freq}",
            "--log_freq=10",
            "--num_workers=0",
            "--seed=1",
            f"--output_dir={output_dir}",
        ]
