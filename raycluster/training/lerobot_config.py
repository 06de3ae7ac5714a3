"""LeRobot's own flag parser, called in-process.

LeRobot's ``parser.wrap`` and ``TrainPipelineConfig.validate`` read ``sys.argv`` (for ``--config_path``
and ``--policy.path``), so the flags are put there for the duration of the call.
"""


import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from raycluster.errors import UsageError


@contextlib.contextmanager
def lerobot_argv(args: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = ["lerobot-train", *args]
    try:
        yield
    finally:
        sys.argv = saved


def parse_train_config(args: list[str], validate: bool):
    """Parse ``args`` exactly as ``lerobot-train`` would; a rejected flag becomes a UsageError."""
    from lerobot.configs import parser
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.scripts import lerobot_train  # importing it registers every policy type

    lerobot_train.register_third_party_plugins()

    @parser.wrap()
    def _parsed(cfg: TrainPipelineConfig) -> TrainPipelineConfig:
        return cfg

    with lerobot_argv(args):
        try:
            cfg = _parsed()
        except SystemExit as exc:
            # parser.wrap has already printed LeRobot's own "error: ..." line to stderr.
            raise UsageError(f"LeRobot rejected the training flags (exit {exc.code}); see the error above") from None
        except Exception as exc:  # draccus raises plain exceptions for unknown choices and fields
            raise UsageError(f"LeRobot rejected the training flags: {exc}") from None
        if validate:
            try:
                cfg.validate()
            except (ValueError, FileExistsError, FileNotFoundError, NotImplementedError) as exc:
                raise UsageError(f"LeRobot rejected the training config: {exc}") from None
    return cfg


def flag_value(args: list[str], name: str) -> str | None:
    """The last value given for ``--name`` in ``args`` (LeRobot's last-wins rule), or None."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
    return value


def checkpoints_dir(output_dir: Path) -> Path:
    from lerobot.utils.constants import CHECKPOINTS_DIR

    return Path(output_dir) / CHECKPOINTS_DIR
