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
    from raycluster.cluster_config import split_cluster_args
    from raycluster.connect import check_capacity, ray_cluster
    from raycluster.errors import UsageError
    from raycluster.probe import report, run_probe

    cluster, rest = split_cluster_args(args.flags)
    if rest:
        raise UsageError(f"unknown arguments {rest}; the probe takes --cluster.* settings and --iters")
    with ray_cluster(cluster.address):
        check_capacity(cluster.num_workers, cluster.use_gpu, cluster.cpus_per_worker)
        result = run_probe(cluster.num_workers, cluster.use_gpu, iters=args.iters)
    print(report(result))
    return 1 if result["transport"].fell_back_to_sockets else 0
