"""``raycluster <verb>``: one module per verb (``cmd_<verb>.py``), each with ``register`` and ``run``."""

from __future__ import annotations

import argparse
import sys

from raycluster.cli import (
    cmd_curves,
    cmd_dashboard,
    cmd_dataset,
    cmd_demo,
    cmd_hub_cache,
    cmd_launch,
    cmd_probe,
    cmd_sim,
    cmd_status,
    cmd_train,
    cmd_up,
)
from raycluster.errors import UsageError
from raycluster.logs import configure
from raycluster.process_exit import exit_now

# What `raycluster --help` says; the module's docstring above is for whoever edits the CLI.
DESCRIPTION = (
    "A Ray cluster inside a SageMaker training job that trains LeRobot policies with Ray Train: train locally "
    "or on a running cluster, simulate a SageMaker job here, launch one, and follow it."
)

VERBS = (
    cmd_demo,
    cmd_dataset,
    cmd_train,
    cmd_curves,
    cmd_sim,
    cmd_hub_cache,
    cmd_launch,
    cmd_status,
    cmd_dashboard,
    cmd_up,
    cmd_probe,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raycluster", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for module in VERBS:
        module.register(verbs)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # Verbs that pass flags through (train) take whatever argparse does not know; argparse's
    # REMAINDER cannot start with an option, so the rest is collected here instead.
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if rest and not hasattr(args, "flags"):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if rest:
        args.flags = [*args.flags, *rest]
    configure(args.verbose)
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"raycluster {args.verb}: error: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``raycluster`` command (and ``python -m raycluster``)."""
    exit_now(main())
