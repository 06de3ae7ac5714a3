"""How a Ray Train worker runs LeRobot's ``train``: one adapter per generation of LeRobot's training API,
chosen by what the installed LeRobot offers, never by its version text.

- ``accelerator_given``: LeRobot 0.6.x, ``train(cfg, accelerator)``: we build the Accelerator.
- ``accelerator_built``: LeRobot main (its next release), ``train(cfg)``: LeRobot builds its own from
  ``--parallelism.*``/``--accelerator.*``, on the process group Ray Train made.

Everything else raycluster touches in LeRobot (its parser, the loop's hooks, the checkpoint layout) is the
same in both and stays in ``raycluster/lerobot/api.py``. The next generation is one more module here
and one more branch in ``line_for``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
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
        """On every rank, before its first step, once LeRobot has resolved the flags (a ``--config_path`` file
        included): a setting this line cannot honour with ours is refused (UsageError)."""

    def worker_args(self, args: list[str], hosts: list[str], sharding: str) -> list[str]:
        """On every rank, once the ranks know each other's hosts (``hosts[rank]``): the flags that depend on
        where the ranks landed."""

    def precision(self, cfg, placement: Placement) -> str:
        """The mixed precision this rank trains with (``no``, ``fp16``, ``bf16``)."""

    def train(self, cfg, args: list[str], placement: Placement) -> None:
        """LeRobot's own loop on this rank, with ``args`` as its ``sys.argv``."""


def train_parameters() -> tuple[list[str], bool]:
    """The parameters of the installed LeRobot's ``train``, read from its source without importing LeRobot
    (which costs the driver ~8 s), and whether it has ``lerobot.distributed.factory``."""
    from importlib.util import find_spec

    spec = find_spec("lerobot")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"LeRobot is not installed here; raycluster supports {SUPPORTED}")
    package = Path(spec.submodule_search_locations[0])
    script = package / "scripts" / "lerobot_train.py"
    tree = ast.parse(script.read_text()) if script.is_file() else ast.Module([], [])
    train = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "train"), None)
    if train is None:
        raise UsageError(
            f"the installed LeRobot has no lerobot.scripts.lerobot_train.train; raycluster supports {SUPPORTED}"
        )
    parameters = [arg.arg for arg in (*train.args.posonlyargs, *train.args.args, *train.args.kwonlyargs)]
    return parameters, (package / "distributed" / "factory.py").is_file()


def line_for(parameters: list[str], has_distributed_factory: bool) -> LeRobotLine:
    """The adapter for a LeRobot whose ``train`` takes ``parameters``."""
    if parameters[:2] == ["cfg", "accelerator"]:
        from raycluster.lerobot.lines.accelerator_given import AcceleratorGiven

        return AcceleratorGiven()
    if parameters == ["cfg"] and has_distributed_factory:
        from raycluster.lerobot.lines.accelerator_built import AcceleratorBuilt

        return AcceleratorBuilt()
    from importlib.metadata import version

    raise UsageError(
        f"lerobot {version('lerobot')} is installed, whose train({', '.join(parameters)}) "
        f"raycluster cannot drive; it supports {SUPPORTED}"
    )


def installed_line() -> LeRobotLine:
    """The adapter for the LeRobot installed here, by what its ``train`` takes."""
    return line_for(*train_parameters())
