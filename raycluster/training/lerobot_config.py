"""LeRobot's own flag parser, called in-process.

LeRobot's ``parser.wrap`` and ``TrainPipelineConfig.validate`` read ``sys.argv`` (for ``--config_path``
and ``--policy.path``), so the flags are put there for the duration of the call.
"""

import contextlib
import io
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


class _Tee(io.TextIOBase):
    """stderr as it is, and a copy of what was written while it is in place."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def text(self) -> str:
        return self.copy.getvalue()

    def __enter__(self) -> "_Tee":
        sys.stderr = self
        return self

    def __exit__(self, *exc) -> None:
        sys.stderr = self.stream


def parse_train_config(args: list[str], validate: bool):
    """Parse ``args`` exactly as ``lerobot-train`` would; a rejected flag becomes a UsageError."""
    from lerobot.configs import parser
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.scripts import lerobot_train  # importing it registers every policy type

    lerobot_train.register_third_party_plugins()

    @parser.wrap()
    def _parsed(cfg: TrainPipelineConfig) -> TrainPipelineConfig:
        return cfg

    with lerobot_argv(args), _Tee(sys.stderr) as stderr:
        try:
            cfg = _parsed()
        except SystemExit as exc:
            # parser.wrap has printed LeRobot's usage and its own "error: ..." line; the latter says what is wrong.
            said = [line.strip() for line in stderr.text().splitlines() if line.strip()]
            start = max((i for i, line in enumerate(said) if "error:" in line), default=max(len(said) - 1, 0))
            reason = " ".join(said[start:]) or f"exit {exc.code}"
            raise UsageError(f"LeRobot rejected the training flags: {reason}") from None
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
