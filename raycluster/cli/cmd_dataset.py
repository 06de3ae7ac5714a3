"""``raycluster dataset synthetic``: write a small learnable LeRobotDataset locally."""

from __future__ import annotations

import argparse
from pathlib import Path

from raycluster.dataset import SyntheticDatasetSpec, make_synthetic_dataset


def register(verbs) -> None:
    parser = verbs.add_parser("dataset", help="make LeRobot datasets")
    kinds = parser.add_subparsers(dest="kind", required=True)
    synthetic = kinds.add_parser("synthetic", help="a learnable 6-DoF dataset with one camera")
    synthetic.add_argument("--root", type=Path, required=True, help="new directory for the dataset")
    synthetic.add_argument("--episodes", type=int, default=SyntheticDatasetSpec.episodes)
    synthetic.add_argument("--frames", type=int, default=SyntheticDatasetSpec.frames, help="frames per episode")
    synthetic.add_argument(
        "--image-size", type=int, default=SyntheticDatasetSpec.image_size, help="square image side, px"
    )
    synthetic.add_argument(
        "--video",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="store the camera as MP4 video (default: images)",
    )
    synthetic.add_argument("--repo-id", default=SyntheticDatasetSpec.repo_id)
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    make_synthetic_dataset(
        SyntheticDatasetSpec(
            root=args.root,
            episodes=args.episodes,
            frames=args.frames,
            image_size=args.image_size,
            video=args.video,
            repo_id=args.repo_id,
            seed=args.seed,
        )
    )
    print(args.root)
    return 0
