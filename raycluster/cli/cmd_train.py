"""``raycluster train [--cluster.*] <lerobot-train flags>``: LeRobot's training under Ray Train."""

from __future__ import annotations

import argparse


def register(verbs) -> None:
    from raycluster.cluster_config import GROUP, ClusterConfig
    from raycluster.settings import group_help

    parser = verbs.add_parser(
        "train",
        help="train a LeRobot policy with Ray Train",
        description="Flags other than --cluster.* go to LeRobot's own parser verbatim, as for lerobot-train "
        "(lerobot-train --help lists them).",
        epilog="raycluster's own settings:\n" + group_help(ClusterConfig, GROUP),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run, flags=[])


def run(args: argparse.Namespace) -> int:
    from raycluster.training.driver.train_job import train

    return train(args.flags)
