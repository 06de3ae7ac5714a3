"""``raycluster dashboard JOB_NAME``: the SSM port forwardings to a job's Ray dashboard and its live curves, and
how to sign in."""

from __future__ import annotations

import argparse
import subprocess

from raycluster.layout import CURVES_PORT, DASHBOARD_PORT


def register(verbs) -> None:
    parser = verbs.add_parser("dashboard", help="port-forward to a SageMaker job's Ray dashboard (SSM)")
    parser.add_argument("job_name")
    parser.add_argument("--region")
    parser.add_argument("--local-port", type=int, default=DASHBOARD_PORT)
    parser.add_argument("--curves-local-port", type=int, default=CURVES_PORT, help="local port of the live curves")
    parser.add_argument(
        "--connect", action="store_true", help="run both port forwardings (needs the AWS CLI + SSM plugin)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.launch.dashboard import curves_forward_command, instructions, port_forward_command

    print(instructions(args.job_name, args.local_port, args.curves_local_port, args.region), flush=True)
    if not args.connect:
        return 0
    curves = subprocess.Popen(curves_forward_command(args.job_name, args.curves_local_port, args.region))
    try:
        return subprocess.call(port_forward_command(args.job_name, args.local_port, args.region))
    finally:
        curves.terminate()
        curves.wait()
