"""``raycluster probe``: all-reduce bandwidth across every worker, and the transport NCCL picked."""

from __future__ import annotations

import argparse


def register(verbs) -> None:
    parser = verbs.add_parser(
        "probe",
        help="all-reduce benchmark across the cluster (NCCL/EFA check on GPUs)",
        description="Takes --cluster.num_workers, --cluster.use_gpu and --cluster.address.",
    )
    parser.add_argument("--iters", type=int, default=10)
    parser.set_defaults(run=run, flags=[])


def run(args: argparse.Namespace) -> int:
    from raycluster.probe import probe_cluster

    return probe_cluster(args.flags, iters=args.iters)
