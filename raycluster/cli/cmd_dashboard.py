"""``raycluster dashboard JOB_NAME``: the SSM port forwarding to a job's Ray dashboard, and how to sign in."""

from __future__ import annotations

import argparse
import subprocess

from raycluster.layout import DASHBOARD_PORT


def register(verbs) -> None:
    parser = verbs.add_parser("dashboard", help="port-forward to a SageMaker job's Ray dashboard (SSM)")
    parser.add_argument("job_name")
    parser.add_argument("--region")
    parser.add_argument("--local-port", type=int, default=DASHBOARD_PORT)
    parser.add_argument(
        "--connect", action="store_true", help="run the port forwarding (needs the AWS CLI + SSM plugin)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.launch.dashboard import instructions, port_forward_command

    print(instructions(args.job_name, args.local_port, args.region))
    if args.connect:
        return subprocess.call(port_forward_command(args.job_name, args.local_port, args.region))
    return 0
