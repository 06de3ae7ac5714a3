"""``raycluster sim``: run a whole SageMaker-shaped job on this machine, one network namespace per host."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raycluster.errors import UsageError


def register(verbs) -> None:
    parser = verbs.add_parser("sim", help="simulate a SageMaker training job on this machine (root)")
    parser.add_argument("--hosts", type=int, help="default: the request's InstanceCount")
    parser.add_argument("--workdir", type=Path, required=True, help="each host's /opt/ml goes to WORKDIR/algo-K/opt/ml")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hyperparameters", type=Path, help="JSON object, as SageMaker's driver hands them over")
    source.add_argument("--request", type=Path, help="a CreateTrainingJob request (`raycluster launch --dry-run`)")
    parser.add_argument("--channel", action="append", default=[], metavar="NAME=PATH", help="an input channel")
    parser.add_argument("--cpus-per-host", type=int, default=1)
    parser.add_argument("--checkpoints", type=Path, help="pre-fill every host's /opt/ml/checkpoints from this "
                        "directory, as SageMaker does when it restarts a job (resume test)")
    parser.set_defaults(run=run)


def parse_channels(values: list[str]) -> dict[str, Path]:
    channels = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not Path(path).exists():
            raise UsageError(f"--channel {value!r}: expected NAME=PATH with an existing PATH")
        channels[name] = Path(path).resolve()
    return channels


def run(args: argparse.Namespace) -> int:
    from raycluster.sim.job import SimSpec, run_sim

    from raycluster.sagemaker.hyperparameters import decode_like_sagemaker

    path = args.hyperparameters or args.request
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable JSON object ({exc})") from None
    if args.request:
        hps = decode_like_sagemaker(document.get("HyperParameters", {}))
        hosts = args.hosts or document["ResourceConfig"]["InstanceCount"]
    else:
        hps, hosts = document, args.hosts
    if not hosts:
        raise UsageError("--hosts is required with --hyperparameters")
    spec = SimSpec(hosts=hosts, workdir=args.workdir.resolve(), hyperparameters=hps,
                   channels=parse_channels(args.channel), cpus_per_host=args.cpus_per_host,
                   checkpoints=args.checkpoints.resolve() if args.checkpoints else None)
    result = run_sim(spec)
    print(json.dumps(result, indent=2))
    return max((h["exit_code"] for h in result["hosts"].values()), key=abs, default=0) and 1
