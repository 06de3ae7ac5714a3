"""``raycluster launch``: submit the SageMaker training job that runs raycluster on every host."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from raycluster.errors import UsageError


def register(verbs) -> None:
    parser = verbs.add_parser(
        "launch",
        help="submit a SageMaker training job (needs raycluster[launch])",
        description="Options below configure the job; every other flag (--cluster.*, LeRobot's) becomes a "
        "hyperparameter that the entry point turns back into the same flag.",
    )
    parser.add_argument("--instance-type", required=True)
    parser.add_argument("--instance-count", type=int, default=1)
    parser.add_argument("--role", required=True, help="IAM role ARN the job runs as")
    parser.add_argument("--region")
    parser.add_argument("--framework-version", default="2.8", help="PyTorch DLC version (its torch is kept)")
    parser.add_argument("--py-version", default="py312")
    parser.add_argument("--image-uri", help="a training image instead of the DLC lookup")
    parser.add_argument("--spot", action="store_true", help="managed spot training (needs --max-wait, --checkpoint-s3)")
    parser.add_argument("--max-run", type=int, default=24 * 3600, help="seconds")
    parser.add_argument("--max-wait", type=int, help="seconds, spot only, >= --max-run")
    parser.add_argument("--checkpoint-s3", help="s3:// URI synced with /opt/ml/checkpoints")
    parser.add_argument("--output-s3", help="s3:// URI for model.tar.gz and output")
    parser.add_argument("--dataset-s3", help="s3:// URI of a LeRobot dataset: the `dataset` channel, FastFile mode")
    parser.add_argument("--job-name", default="raycluster", help="base job name")
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--subnet", action="append", default=[])
    parser.add_argument("--security-group", action="append", default=[])
    parser.add_argument(
        "--include", action="append", default=[], metavar="SCRIPT", help="your own Ray job script, staged into jobs/"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the CreateTrainingJob request as JSON (and, on stderr, the code channel's files); "
        "no network, no credentials, nothing uploaded",
    )
    parser.add_argument("--wait", action="store_true", help="follow the job until it ends; exit with its outcome")
    parser.set_defaults(run=run, flags=[])


def run(args: argparse.Namespace) -> int:
    try:
        from raycluster.launch.trainer import launch, stage
    except ImportError as exc:
        raise UsageError(f"the launcher needs the SageMaker SDK: pip install 'raycluster[launch]' ({exc})") from None
    from raycluster.launch.spec import LaunchSpec
    from raycluster.launch.status import describe

    tags = {}
    for tag in args.tag:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag {tag!r}: expected KEY=VALUE")
        tags[key] = value
    spec = LaunchSpec(
        instance_type=args.instance_type,
        role=args.role,
        instance_count=args.instance_count,
        region=args.region,
        framework_version=args.framework_version,
        py_version=args.py_version,
        image_uri=args.image_uri,
        spot=args.spot,
        max_run=args.max_run,
        max_wait=args.max_wait,
        checkpoint_s3=args.checkpoint_s3,
        output_s3=args.output_s3,
        dataset_s3=args.dataset_s3,
        base_job_name=args.job_name,
        tags=tags,
        subnets=tuple(args.subnet),
        security_groups=tuple(args.security_group),
        include=tuple(args.include),
        flags=tuple(args.flags),
    )
    if args.dry_run:
        with tempfile.TemporaryDirectory(prefix="raycluster-dry-run-") as tmp:
            staged = stage(spec, Path(tmp))
            json.dump(staged.request, sys.stdout, indent=2)
            print()
            print(
                "the code channel would hold:\n  "
                + "\n  ".join(staged.code_files())
                + "\n  (and the job's Ray auth token, .raycluster/auth_token)",
                file=sys.stderr,
            )
        return 0
    request = launch(spec, wait=args.wait)
    job = request["TrainingJobName"]
    print(
        f"submitted {job}; follow it with: raycluster status {job}"
        + (f" --region {args.region}" if args.region else "")
    )
    if args.wait:
        status = describe(job, args.region)
        print(json.dumps(status, indent=2))
        return 0 if status["status"] == "Completed" else 1
    return 0
