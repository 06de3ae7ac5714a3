"""LeRobot's verdict on the flags, given on the ranks: the driver reads only the plain values it needs, without
importing LeRobot (~8 s it would add to every run), so LeRobot's parser and ``validate()`` and the installed
line's check of the resolved config run here, on every rank, before anything is written. The ranks agree on
one verdict before their first other collective: a flag refused on any rank ends every rank of the attempt, and
rank 0 returns the reason (``Refused``) rather than raising it, since Ray Train retries a rank that raised and
calls a run whose ranks all returned finished."""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from raycluster.errors import UsageError
from raycluster.lerobot.api import parse_train_config, validated
from raycluster.lerobot.lines import LineSettings, installed_line
from raycluster.training.worker.config import WorkerConfig


@dataclass(frozen=True)
class Refused:
    """What rank 0 returns when LeRobot refused the flags: the driver raises ``reason`` as a usage error."""

    reason: str


class FlagsRefused(Exception):
    """Every rank's: the flags were refused (on this rank or another); the attempt ends before any step."""


def checked_config(args: list[str], settings: LineSettings, rank: int):
    """The installed LeRobot line and this rank's config of ``args``, as parsed (LeRobot's ``train`` validates it
    itself), and None when LeRobot and the line take them; else None, None and why not. LeRobot's check that the
    output dir does not exist yet is the driver's, made before any cluster started. Only rank 0 lets LeRobot
    print its usage, so a refusal is one usage text in the log at any number of ranks."""
    try:
        line = installed_line()
        cfg = parse_train_config(args, validate=False, echo=rank == 0)
        line.check_config(validated(cfg, args, echo=rank == 0, output_dir_checked=True), settings)
    except UsageError as exc:
        return None, None, str(exc)
    except ImportError as exc:  # a LeRobot this host cannot import: every rank ends with its word, not only this
        return None, None, f"LeRobot could not be imported on this host: {exc}"
    return line, cfg, None


def agree_on_flags(worker: WorkerConfig, rank: int, world_size: int):
    """Every rank's check of the flags, then one verdict for all: the installed LeRobot line and this rank's
    config when every rank took them, else ``FlagsRefused`` (the first refusing rank's reason) on every rank."""
    line, cfg, reason = checked_config(worker.lerobot_args, worker.line_settings, rank)
    reasons: list[str | None] = [None] * world_size
    dist.all_gather_object(reasons, reason)
    refused = next((reason for reason in reasons if reason is not None), None)
    if refused is not None:
        raise FlagsRefused(refused)
    return line, cfg
