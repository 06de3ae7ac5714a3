"""How a Ray Train worker runs LeRobot's ``train``: one adapter per generation of LeRobot's training API,
chosen by what the installed LeRobot offers, never by its version text.

- ``accelerator_given``: LeRobot 0.6.x, ``train(cfg, accelerator)``: we build the Accelerator.
- ``accelerator_built``: LeRobot main (its next release), ``train(cfg)``: LeRobot builds its own from
  ``--parallelism.*``/``--accelerator.*``, on the process group Ray Train made.

Everything else raycluster touches in LeRobot (its parser, the loop's hooks, the checkpoint layout) is the
same in both and stays in ``raycluster/lerobot/api.py``. The next generation is one more module here
and one more branch in ``installed_line``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Protocol

from raycluster.errors import UsageError

SUPPORTED = (
    "LeRobot 0.6.x (train(cfg, accelerator): pip install 'lerobot[training]==0.6.1') or LeRobot main "
    "(train(cfg) with --parallelism.*: its wheel, see the README)"
)


@dataclass(frozen=True)
class LineSettings:
    """Our flags that decide how LeRobot's flags are planned on a line (``ClusterConfig.line()`` gives them)."""

    num_workers: int = 1
    sharding: str = "none"
    """``--cluster.sharding``: ``none``, ``fsdp`` or ``hsdp``."""
    mixed_precision: str = "auto"
    model_dir: str = ""


@dataclass(frozen=True)
class Placement:
    """Where one Ray Train worker runs, and what it trains on."""

    rank: int
    world_size: int
    use_gpu: bool
    mixed_precision: str
    """``--cluster.mixed_precision`` (``auto``, ``no``, ``fp16``, ``bf16``)."""


class LeRobotLine(Protocol):
    name: str
    saves_on_every_rank: bool
    """LeRobot's save is a collective: every rank writes its own shards on its own host (LeRobot main)."""

    def plan_args(self, args: list[str], cluster: LineSettings) -> list[str]:
        """On the driver, before any worker starts: LeRobot's flags as this line takes ours; a combination it
        cannot run is refused (UsageError)."""

    def check_config(self, cfg, cluster: LineSettings) -> None:
        """On the driver, once LeRobot has resolved the flags (a ``--config_path`` file included): a setting
        this line cannot honour with ours is refused (UsageError)."""

    def worker_args(self, args: list[str], hosts: list[str], sharding: str) -> list[str]:
        """On every rank, once the ranks know each other's hosts (``hosts[rank]``): the flags that depend on
        where the ranks landed."""

    def precision(self, cfg, placement: Placement) -> str:
        """The mixed precision this rank trains with (``no``, ``fp16``, ``bf16``)."""

    def train(self, cfg, args: list[str], placement: Placement) -> None:
        """LeRobot's own loop on this rank, with ``args`` as its ``sys.argv``."""


def installed_line() -> LeRobotLine:
    """The adapter for the LeRobot installed here, by what its ``train`` takes."""
    from importlib.metadata import version
    from importlib.util import find_spec

    from lerobot.scripts import lerobot_train

    parameters = list(inspect.signature(lerobot_train.train).parameters)
    if parameters[:2] == ["cfg", "accelerator"]:
        from raycluster.lerobot.lines.accelerator_given import AcceleratorGiven

        return AcceleratorGiven()
    if parameters == ["cfg"] and find_spec("lerobot.distributed.factory") is not None:
        from raycluster.lerobot.lines.accelerator_built import AcceleratorBuilt

        return AcceleratorBuilt()
    raise UsageError(
        f"lerobot {version('lerobot')} is installed, whose train{inspect.signature(lerobot_train.train)} "
        f"raycluster cannot drive; it supports {SUPPORTED}"
    )
