"""``raycluster sim``: run a whole SageMaker training job on this machine, one network namespace per host,
through the SageMaker SDK's own container driver."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from raycluster.errors import UsageError

SIM_ROLE = "arn:aws:iam::123456789012:role/raycluster-sim"
SIM_INSTANCE_TYPE = "ml.c5.xlarge"


def register(verbs) -> None:
    parser = verbs.add_parser(
        "sim",
        help="simulate a SageMaker training job on this machine (root)",
        description="The SageMaker SDK stages the job's channels (code, sm_drivers) on "
        "this machine; each host runs the request's container command (the SDK's sm_train.sh) "
        "as PID 1 in its own network and PID namespace.",
    )
    parser.add_argument("--hosts", type=int, help="default: the request's InstanceCount")
    parser.add_argument(
        "--instance-group",
        action="append",
        default=[],
        metavar="NAME=TYPE:COUNT",
        help="a heterogeneous cluster, as `raycluster launch --instance-group` makes one (repeatable; no --hosts)",
    )
    parser.add_argument("--workdir", type=Path, required=True, help="each host's /opt/ml goes to WORKDIR/algo-K/opt/ml")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--hyperparameters",
        type=Path,
        help="JSON object of hyperparameters, sent as a ModelTrainer sends them (strings as they are, "
        "other values as JSON); keys as SageMaker's driver needs them (policy__type, not policy.type)",
    )
    source.add_argument("--request", type=Path, help="a CreateTrainingJob request (`raycluster launch --dry-run`)")
    parser.add_argument("--channel", action="append", default=[], metavar="NAME=PATH", help="an input channel")
    parser.add_argument(
        "--include", action="append", default=[], metavar="PATH", help="a Ray job script staged into jobs/, as launch's"
    )
    parser.add_argument(
        "--wheel",
        action="append",
        default=[],
        metavar="PATH",
        help="a wheel shipped with the code and installed on every host, as `raycluster launch --wheel` ships it "
        "(the hosts install it in their own scratch; this machine's environment is not changed)",
    )
    parser.add_argument(
        "--checkpoints",
        type=Path,
        help="pre-fill every host's /opt/ml/checkpoints from this "
        "directory, as SageMaker does when it restarts a job (resume test)",
    )
    parser.add_argument(
        "--aws-endpoint",
        metavar="URL",
        help="an AWS endpoint on this machine's loopback (e.g. a moto server) that the hosts reach at the sim's "
        "gateway, with this shell's AWS_* credentials standing for the job's role (default: no AWS at all)",
    )
    parser.set_defaults(run=run)


def parse_channels(values: list[str]) -> dict[str, Path]:
    channels = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not Path(path).exists():
            raise UsageError(f"--channel {value!r}: expected NAME=PATH with an existing PATH")
        channels[name] = Path(path).resolve()
    return channels


def request_hosts(request: dict) -> int:
    resource = request.get("ResourceConfig", {})
    return sum(g["InstanceCount"] for g in resource.get("InstanceGroups") or []) or resource.get("InstanceCount", 0)


def group_hosts(groups: dict[str, str]) -> int:
    counts = [text.rpartition(":")[2] for text in groups.values()]
    return sum(int(count) for count in counts if count.isdigit())


def local_torch_release() -> str:
    """The simulated image is this machine's Python: its torch stands for the DLC's."""
    import importlib.metadata

    return ".".join(importlib.metadata.version("torch").split(".")[:2])


def sim_launch(args: argparse.Namespace, document: dict):
    """What ``raycluster launch`` would stage for this job, and how many hosts it has."""
    from raycluster.launch.spec import LaunchSpec
    from raycluster.launch.wheelhouse import CHANNEL as WHEELHOUSE

    channels = parse_channels(args.channel)
    groups = dict(group.partition("=")[::2] for group in args.instance_group)
    hosts = args.hosts or request_hosts(document if args.request else {}) or group_hosts(groups)
    if not hosts:
        raise UsageError("--hosts (or --instance-group) is required with --hyperparameters")
    spec = LaunchSpec(
        instance_type="" if groups else SIM_INSTANCE_TYPE,
        instance_groups=groups,
        role=SIM_ROLE,
        instance_count=1 if groups else hosts,
        region="us-east-1",
        framework_version=local_torch_release(),
        image_uri="raycluster-sim:local",
        raw_hyperparameters={} if args.request else document,
        wheels=tuple(args.wheel),
        # A wheelhouse channel given: the hosts install from it alone, as after `raycluster launch --wheelhouse`.
        wheelhouse=str(channels[WHEELHOUSE]) if WHEELHOUSE in channels else None,
        include=tuple(args.include),
    )
    return spec, hosts


def run(args: argparse.Namespace) -> int:
    try:
        import sagemaker.train  # noqa: F401 -- the SDK stages the job and provides the container driver
    except ImportError as exc:
        raise UsageError(
            f"the sim runs the SageMaker SDK's own driver: pip install 'raycluster[launch]' ({exc})"
        ) from None
    from raycluster.launch.trainer import Staged, stage
    from raycluster.sim.job import run_sim
    from raycluster.sim.spec import SimSpec

    path = args.hyperparameters or args.request
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable JSON object ({exc})") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: expected a JSON object")
    spec, hosts = sim_launch(args, document)
    workdir = args.workdir.resolve()
    with tempfile.TemporaryDirectory(prefix="raycluster-sim-stage-") as tmp:
        staged = stage(spec, Path(tmp))
        if args.request:
            # The request as given (it may have been edited); the channels as the SDK stages them here.
            staged = Staged(document, staged.code, staged.drivers)
        result = run_sim(
            SimSpec(
                hosts=hosts,
                workdir=workdir,
                staged=staged,
                channels=parse_channels(args.channel),
                checkpoints=args.checkpoints.resolve() if args.checkpoints else None,
                aws_endpoint=args.aws_endpoint,
            )
        )
    print(json.dumps(result, indent=2))
    return max((h["exit_code"] for h in result["hosts"].values()), key=abs, default=0) and 1
