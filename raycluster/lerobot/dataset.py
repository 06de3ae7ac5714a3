"""A small, learnable LeRobotDataset made locally with LeRobot's own writer API.

Nothing comes from the Hub: tests, the demo and the benchmarks train on what this writes.
The motion is a smooth 6-joint trajectory whose action is the next state, and the camera
image draws the first two joints as a dot, so a policy has something real to learn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from raycluster.errors import UsageError

log = logging.getLogger(__name__)

STATE_DIM = 6
CAMERA_KEY = "observation.images.front"


@dataclass(frozen=True)
class SyntheticDatasetSpec:
    root: Path
    episodes: int = 4
    frames: int = 60
    image_size: int = 64
    video: bool = False
    fps: int = 10
    repo_id: str = "raycluster/synthetic"
    seed: int = 0

    def check(self) -> None:
        for name in ("episodes", "frames", "image_size", "fps"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.image_size < 8:
            raise UsageError(f"--image-size must be >= 8 pixels, got {self.image_size}")
        if self.root.exists():
            raise UsageError(f"--root {self.root} already exists; pick a new directory (LeRobot refuses to overwrite)")


def _features(spec: SyntheticDatasetSpec) -> dict:
    joints = [f"joint_{i}" for i in range(STATE_DIM)]
    return {
        "observation.state": {"dtype": "float32", "shape": (STATE_DIM,), "names": joints},
        "action": {"dtype": "float32", "shape": (STATE_DIM,), "names": joints},
        CAMERA_KEY: {
            "dtype": "video" if spec.video else "image",
            "shape": (spec.image_size, spec.image_size, 3),
            "names": ["height", "width", "channels"],
        },
    }


def _trajectory(rng: np.random.Generator, frames: int) -> np.ndarray:
    """frames+1 states of a sum of two sinusoids per joint: smooth, varied per episode."""
    t = np.arange(frames + 1, dtype=np.float32)[:, None]
    freq = rng.uniform(0.05, 0.2, size=(2, STATE_DIM)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(2, STATE_DIM)).astype(np.float32)
    return 0.6 * np.sin(freq[0] * t + phase[0]) + 0.3 * np.sin(freq[1] * t + phase[1])


def _render(state: np.ndarray, size: int) -> np.ndarray:
    image = np.full((size, size, 3), 32, dtype=np.uint8)
    radius = max(1, size // 16)
    cy, cx = ((state[:2] + 1.0) / 2.0 * (size - 1)).clip(0, size - 1).astype(int)
    image[max(0, cy - radius) : cy + radius + 1, max(0, cx - radius) : cx + radius + 1] = (230, 120, 40)
    return image


def make_synthetic_dataset(spec: SyntheticDatasetSpec) -> Path:
    """Write the dataset under spec.root and return that root."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec.check()
    rng = np.random.default_rng(spec.seed)
    dataset = LeRobotDataset.create(
        repo_id=spec.repo_id,
        fps=spec.fps,
        features=_features(spec),
        root=spec.root,
        robot_type="synthetic_6dof",
        use_videos=spec.video,
    )
    for episode in range(spec.episodes):
        states = _trajectory(rng, spec.frames)
        for i in range(spec.frames):
            dataset.add_frame(
                {
                    "observation.state": states[i],
                    "action": states[i + 1],
                    CAMERA_KEY: _render(states[i], spec.image_size),
                    "task": "follow the trajectory",
                }
            )
        dataset.save_episode()
        log.info("dataset: episode %d/%d written", episode + 1, spec.episodes)
    dataset.finalize()
    log.info("dataset: %d episodes x %d frames at %s", spec.episodes, spec.frames, spec.root)
    return spec.root


def check_dataset_root(root: Path) -> None:
    """Fail before any cluster starts if --dataset.root is not a LeRobot dataset."""
    if not root.is_dir():
        raise UsageError(
            f"--dataset.root {root} does not exist; make one with `raycluster dataset synthetic --root {root}`"
        )
    if not (root / "meta" / "info.json").is_file():
        raise UsageError(
            f"--dataset.root {root} is not a LeRobot dataset (no meta/info.json); point it at a dataset root"
        )
