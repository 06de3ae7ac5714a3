"""``raycluster dataset synthetic|pusht``: write a LeRobotDataset locally, made up or recorded in PushT."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from raycluster.lerobot.dataset import SyntheticDatasetSpec, make_synthetic_dataset
from raycluster.lerobot.pusht_dataset import OBS_TYPES, PushTDatasetSpec, make_pusht_dataset


def register(verbs) -> None:
    parser = verbs.add_parser("dataset", help="make LeRobot datasets")
    kinds = parser.add_subparsers(dest="kind", required=True)
    _register_synthetic(kinds)
    _register_pusht(kinds)


def _register_synthetic(kinds) -> None:
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
    synthetic.set_defaults(run=run, kind_spec=(SyntheticDatasetSpec, make_synthetic_dataset))


def _register_pusht(kinds) -> None:
    pusht = kinds.add_parser(
        "pusht", help="scripted episodes recorded in gym_pusht/PushT-v0, with the features LeRobot's pusht env uses"
    )
    pusht.add_argument("--root", type=Path, required=True, help="new directory for the dataset")
    pusht.add_argument("--episodes", type=int, default=PushTDatasetSpec.episodes)
    pusht.add_argument(
        "--obs-type",
        choices=OBS_TYPES,
        default=PushTDatasetSpec.obs_type,
        help="the env's obs_type: a 96x96 image or the T's 8 keypoints, each with the agent's position",
    )
    pusht.add_argument(
        "--max-steps",
        type=int,
        default=PushTDatasetSpec.max_steps,
        help="frames per episode at most; an episode also ends when the T is on its target",
    )
    pusht.add_argument("--repo-id", default=PushTDatasetSpec.repo_id)
    pusht.add_argument("--seed", type=int, default=0, help="episode i is env.reset(seed=SEED + i)")
    pusht.set_defaults(run=run, kind_spec=(PushTDatasetSpec, make_pusht_dataset))


def run(args: argparse.Namespace) -> int:
    """Either kind: its spec from the options of the same names (the rest keep their defaults), then its writer."""
    spec_type, make = args.kind_spec
    make(spec_type(**{f.name: getattr(args, f.name) for f in fields(spec_type) if hasattr(args, f.name)}))
    print(args.root)
    return 0
