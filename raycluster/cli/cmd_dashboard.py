"""``raycluster dashboard JOB_NAME``: the SSM port forwardings to a job's Ray dashboard and its live curves, and
how to sign in."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess

from raycluster.errors import UsageError
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


# SageMaker's own rule for a training job's name.
JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")


def run(args: argparse.Namespace) -> int:
    from raycluster.launch.dashboard import curves_forward_command, instructions, port_forward_command

    if not JOB_NAME.fullmatch(args.job_name):
        raise UsageError(
            f"{args.job_name!r} is not a training job's name (letters, digits, '-', at most 63): "
            "give the name `raycluster launch` printed"
        )
    if args.connect:
        args.region = connect_region(args.region)
    print(instructions(args.job_name, args.local_port, args.curves_local_port, args.region), flush=True)
    if not args.connect:
        return 0
    curves = subprocess.Popen(curves_forward_command(args.job_name, args.curves_local_port, args.region))
    try:
        return subprocess.call(port_forward_command(args.job_name, args.local_port, args.region))
    finally:
        curves.terminate()
        curves.wait()


def connect_region(region: str | None) -> str:
    """The region the forwardings go to, and the AWS CLI they need, checked before the CLI says it (twice)."""
    import boto3

    region = region or boto3.session.Session().region_name
    if not region:
        raise UsageError("no AWS region: pass --region (the job's) or set AWS_DEFAULT_REGION")
    if shutil.which("aws") is None:
        raise UsageError("--connect needs the AWS CLI and its Session Manager plugin on PATH")
    return region
