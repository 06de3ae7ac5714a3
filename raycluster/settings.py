"""One way to declare and read a group of settings.

A group is a typed dataclass: each field's default is its one default, the docstring under it is its help,
and an optional ``check()`` holds its ranges. Its flags are spelled ``--<group>.<field>=value``, the dotted
spelling LeRobot's flags use, and are decoded by draccus, the parser LeRobot itself uses (so ``true``/``false``,
``yes``/``no``, ``null`` mean the same everywhere). Flags of other groups pass through untouched, in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import draccus
import yaml
from draccus.argparsing import ArgumentParser
from draccus.utils import DecodingError

from raycluster.errors import UsageError

KINDS = {"bool": "true or false", "int": "int", "float": "a number"}
TEXT = ("str", "str | None")


def _wrapper(cls: type, group: str) -> type:
    """A dataclass with the group as its one field: how draccus spells ``--group.field``."""
    return dataclasses.make_dataclass("Flags", [(group, cls, dataclasses.field(default_factory=cls))])


def split_group(argv: list[str], group: str) -> tuple[dict[str, str], list[str]]:
    """``--group.field=value`` (or ``--group.field value``) flags as ``{field: text}``, and the rest."""
    prefix = f"--{group}."
    values: dict[str, str] = {}
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if not arg.startswith(prefix):
            rest.append(arg)
            continue
        key, sep, text = arg[len(prefix) :].partition("=")
        if not sep:
            text = next(it, None)
            if text is None:
                raise UsageError(f"{prefix}{key} needs a value: {prefix}{key}=VALUE")
        values[key] = text
    return values, rest


def _reads_as_yaml(text: str) -> bool:
    """draccus reads each value as YAML: ``{`` or ``*a`` is a syntax error there, not a value."""
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return True


def parse_group[T](
    cls: type[T], group: str, argv: list[str], label: Callable[[str], str] | None = None, noun: str = "setting"
) -> tuple[T, list[str]]:
    """The group's settings from ``argv`` (last wins), checked, and the flags that are not the group's.
    ``label`` and ``noun`` name a field in errors as the user gave it (``setting --group.field`` unless the
    settings came as something else, such as SageMaker hyperparameters)."""
    label = label or (lambda name: f"--{group}.{name}")
    texts, rest = split_group(argv, group)
    kinds = {f.name: f.type for f in dataclasses.fields(cls)}
    for name in texts:
        if name not in kinds:
            raise UsageError(f"unknown {noun} {label(name)}; known: {', '.join(label(k) for k in kinds)}")
    # Text settings are taken as given: draccus reads values as YAML, where `no` would become False.
    raw = {k: v for k, v in texts.items() if kinds[k] in TEXT}
    decoded = {k: v for k, v in texts.items() if k not in raw}
    try:
        flags = [f"--{group}.{k}={v}" for k, v in decoded.items()]
        parsed = getattr(draccus.parse(_wrapper(cls, group), args=flags), group)
    except (DecodingError, yaml.YAMLError) as exc:
        name = next((k for k in decoded if f"{group}.{k}`" in str(exc) or not _reads_as_yaml(decoded[k])), "")
        kind = KINDS.get(str(kinds.get(name)), str(kinds.get(name)))
        raise UsageError(f"{noun} {label(name)} must be {kind}, got {texts.get(name)!r}") from None
    for name in decoded:  # draccus reads `null` as None, which only an optional field may hold
        if getattr(parsed, name) is None and "None" not in str(kinds[name]):
            kind = KINDS.get(str(kinds[name]), str(kinds[name]))
            raise UsageError(f"{noun} {label(name)} must be {kind}, got {texts[name]!r}")
    optional_null = {k: None for k, v in raw.items() if v == "null" and kinds[k] == "str | None"}
    parsed = dataclasses.replace(parsed, **{**raw, **optional_null})
    check = getattr(parsed, "check", None)
    if check is not None:
        check()
    return parsed, rest


def to_flags(settings, group: str) -> list[str]:
    """The flags that reproduce ``settings`` (the inverse of ``parse_group``)."""
    out = []
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else value
        out.append(f"--{group}.{field.name}={text}")
    return out


def group_help(cls: type, group: str) -> str:
    """Every ``--group.*`` flag with its type, help and default, as draccus formats them."""
    text = ArgumentParser(config_class=_wrapper(cls, group)).parser.format_help()
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(f"--{group}.")), len(lines))
    return "\n".join(lines[start:]).rstrip()
