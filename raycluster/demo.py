"""The demo run: PushT episodes recorded here by a scripted pusher, a tiny ACT trained by 2 Ray Train workers on
CPU, every checkpoint evaluated meanwhile on the CPU they leave (held-out loss, rollouts in gym-pusht).

The same flags serve the tests and the benchmarks, so what the README shows is what is tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raycluster.lerobot.pusht_dataset import PushTDatasetSpec

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

    episodes: int = 10

    @property
    def dataset(self) -> PushTDatasetSpec:
        return PushTDatasetSpec(root=self.workdir / "pusht", episodes=self.episodes)

    def train_flags(self, output_dir: Path) -> list[str]:
        return [
            f"--cluster.num_workers={self.num_workers}",
            "--cluster.address=local",
            # Half a CPU each in Ray's count: the local cluster's other CPU runs the evaluations.
            "--cluster.cpus_per_worker=0.5",
            f"--cluster.checkpoint_dir={output_dir.with_name(output_dir.name + '-checkpoints')}",
            "--cluster.async_eval=true",
            "--cluster.keep_best=eval_loss",
            "--dataset.eval_split=0.1",
            "--env.type=pusht",
            "--eval.n_episodes=4",
            "--eval.batch_size=4",
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
