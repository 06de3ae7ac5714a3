"""``raycluster launch``: submit the SageMaker training job that runs raycluster on every host."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from draccus.wrappers.docstring import get_attribute_docstring

from raycluster.errors import UsageError
from raycluster.layout import AUTH_TOKEN_FILE


def register(verbs) -> None:
    from raycluster.cluster_config import GROUP, ClusterConfig
    from raycluster.launch.spec import LaunchSpec
    from raycluster.sagemaker.entry_settings import ENTRY, EntrySettings
    from raycluster.settings import group_help

    parser = verbs.add_parser(
        "launch",
        help="submit a SageMaker training job (needs raycluster[launch])",
        description="Options below configure the job; every other flag (--cluster.*, --entry.*, LeRobot's) becomes "
        "a hyperparameter that the entry point turns back into the same flag.",
        epilog=f"how the entry point runs the cluster:\n{group_help(EntrySettings, ENTRY)}\n\n"
        f"the training's own settings:\n{group_help(ClusterConfig, GROUP)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(parser, LaunchSpec)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the CreateTrainingJob request as JSON (and, on stderr, the code channel's files); "
        "no network, no credentials, nothing uploaded",
    )
    parser.add_argument(
        "--stage-only",
        metavar="DIR",
        type=Path,
        help="for your own ModelTrainer: make the source dir DIR (code, requirements.txt, constraints.txt, the "
        "job's Ray auth token) and print the hyperparameters as JSON; nothing else happens",
    )
    parser.add_argument("--wait", action="store_true", help="follow the job until it ends; exit with its outcome")
    parser.set_defaults(run=run, flags=[])


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        # The text is not repeated: a value typed without its KEY= may be a secret's.
        raise argparse.ArgumentTypeError("expected KEY=VALUE")
    return key, value


def offered(spec: type) -> list[tuple[dataclasses.Field, str]]:
    """The fields of ``spec`` that are options, with their flag (``--field-name`` unless declared)."""
    pairs = [(f, f.metadata.get("flag", "--" + f.name.replace("_", "-"))) for f in dataclasses.fields(spec)]
    return [(field, flag) for field, flag in pairs if flag]


def add_options(parser: argparse.ArgumentParser, spec: type) -> None:
    """One option per field of ``spec``, its help the field's docstring; unset options stay out of the
    namespace (argparse.SUPPRESS), so each default lives only in the dataclass."""
    for field, flag in offered(spec):
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        doc = get_attribute_docstring(spec, field.name).docstring_below or None
        metavar = field.metadata.get("metavar") or (
            "KEY=VALUE" if field.type.startswith("dict") else flag[2:].upper().replace("-", "_")
        )
        kwargs = dict(dest=field.name, help=doc, default=argparse.SUPPRESS, required=required)
        if field.type == "bool":
            parser.add_argument(flag, action="store_true", **kwargs)
        elif field.type.startswith(("tuple", "dict")):
            is_dict = field.type.startswith("dict")
            parser.add_argument(flag, action="append", type=key_value if is_dict else str, metavar=metavar, **kwargs)
        else:
            if "const" in field.metadata:  # the flag alone stands for its const
                kwargs |= {"nargs": "?", "const": field.metadata["const"]}
            parser.add_argument(flag, type=int if field.type.startswith("int") else str, metavar=metavar, **kwargs)


def given_options(args: argparse.Namespace, spec: type) -> dict:
    """The options the user gave, as ``spec``'s field values (repeated ones as tuples, KEY=VALUE ones as a dict)."""
    given = {field.name: getattr(args, field.name) for field, _ in offered(spec) if hasattr(args, field.name)}
    for field, _ in offered(spec):
        if field.type.startswith("dict") and field.name in given:
            given[field.name] = dict(given[field.name])
    return {name: tuple(value) if isinstance(value, list) else value for name, value in given.items()}


def run(args: argparse.Namespace) -> int:
    try:
        from raycluster.launch.trainer import launch, stage, stage_source
    except ImportError as exc:
        raise UsageError(f"the launcher needs the SageMaker SDK: pip install 'raycluster[launch]' ({exc})") from None
    from raycluster.launch.spec import LaunchSpec
    from raycluster.launch.status import describe

    spec = LaunchSpec(**given_options(args, LaunchSpec), flags=tuple(args.flags))
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
    if args.stage_only:
        if args.stage_only.exists():
            raise UsageError(f"--stage-only {args.stage_only}: already exists; name a new directory")
        spec.check()
        stage_source(spec, args.stage_only)
        json.dump(spec.hyperparameters, sys.stdout, indent=2)
        print(f"\nstaged {args.stage_only} (with the job's Ray auth token, {AUTH_TOKEN_FILE})", file=sys.stderr)
        return 0
    request = launch(spec, wait=args.wait)
    job = request["TrainingJobName"]
    print(
        f"submitted {job}; follow it with: raycluster status {job}"
        + (f" --region {spec.region}" if spec.region else "")
    )
    if args.wait:
        status = describe(job, spec.region)
        print(json.dumps(status, indent=2))
        return 0 if status["status"] == "Completed" else 1
    return 0
