"""``raycluster curves RUN_DIR`` / ``raycluster curves --job NAME``: a run's loss, throughput and hardware
curves in trackio's dashboard (or, with ``--no-serve``, one line per run)."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_PORT = 7860


def register(verbs) -> None:
    parser = verbs.add_parser("curves", help="show a run's curves (trackio dashboard), local or a SageMaker job's")
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run's output_dir (it holds curves/)")
    parser.add_argument("--job", help="a SageMaker job's name: fetch its published curves from its checkpoint S3 URI")
    parser.add_argument("--region")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="local port of the dashboard")
    parser.add_argument("--no-serve", action="store_true", help="print what was recorded and exit")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.curves import view
    from raycluster.errors import UsageError
    from raycluster.launch.aws_errors import AwsError, one_line
    from raycluster.launch.dashboard import JOBS_DIR
    from raycluster.launch.status import describe

    if bool(args.run_dir) == bool(args.job):
        raise UsageError("give a run's directory or --job NAME (one of them)")
    refresh = None
    if args.job:
        try:
            root = view.job_root(args.job, describe(args.job, args.region)["checkpoints"])
            store = view.job_store(root, JOBS_DIR / args.job / "curves")
        except UsageError:
            raise
        except Exception as exc:  # botocore's: no region, no credentials, no such job, unreachable
            raise AwsError(one_line(exc)) from None
        refresh = lambda: view.job_store(root, store)  # noqa: E731 (a job that runs keeps publishing)
    else:
        store = view.run_store(args.run_dir)
    for line in view.describe_series(store):
        print(line)
    if not args.no_serve:
        view.serve(store, args.port, refresh)
    return 0
