"""``raycluster status JOB_NAME``: state, failure reason, checkpoints and model of a training job."""

from __future__ import annotations

import argparse
import json


def register(verbs) -> None:
    parser = verbs.add_parser("status", help="show a SageMaker training job's state and artifacts")
    parser.add_argument("job_name")
    parser.add_argument("--region")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.launch.aws_errors import AwsError, one_line
    from raycluster.launch.status import describe

    try:
        status = describe(args.job_name, args.region)
    except Exception as exc:  # botocore's: no region, no credentials, no such job, unreachable
        raise AwsError(one_line(exc)) from None
    print(json.dumps(status, indent=2))
    return 1 if status["status"] == "Failed" else 0
