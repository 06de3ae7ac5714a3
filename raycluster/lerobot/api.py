"""Every place raycluster reaches into LeRobot that both supported lines share (LeRobot 0.6.x and LeRobot
main); how ``train`` itself is called differs between them and lives in ``lines/``, one module per
line. The touch points, each with a test in ``tests/test_lerobot_api.py``:

- its flag parser (``parser.wrap`` over ``TrainPipelineConfig``, which reads ``sys.argv``);
- four functions ``train`` looks up in its module at every step, wrapped by ``hooked``: ``update_policy``
  (one optimizer step), ``should_save_checkpoint``, ``save_checkpoint`` (on LeRobot main a collective every
  rank calls, each writing its own shards on its own node) and ``update_last_checkpoint`` (called by the main
  process once a checkpoint is whole); and ``MetricsTracker.reset_averages``, which ``train`` calls right after it logged a
  step, when the tracker holds exactly the numbers it printed;
- the ``tqdm`` it makes its progress bar with (``log_lines.LoggedProgress``: a line per interval, not per step);
- the checkpoint layout: ``checkpoints/<step>/{pretrained_model,training_state}``, ``checkpoints/last``.
"""

# No `from __future__ import annotations`: LeRobot's parser.wrap reads the annotation of the function it
# wraps as a class, and a postponed annotation is a string.
import contextlib
import copy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.lerobot.stderr_copy import StderrCopy

CHECKPOINTS, LAST, PRETRAINED_MODEL = "checkpoints", "last", "pretrained_model"
"""LeRobot's names (``lerobot.utils.constants``), here so that no other module imports LeRobot for them."""
LOOP_FUNCTIONS = ("update_policy", "should_save_checkpoint", "save_checkpoint", "update_last_checkpoint")
"""What ``lerobot_train.train`` looks up in its own module at every call, and ``hooked`` wraps there."""


@contextlib.contextmanager
def lerobot_argv(args: list[str]) -> Iterator[None]:
    """LeRobot's ``parser.wrap`` and ``TrainPipelineConfig.validate`` read ``sys.argv`` (``--config_path``,
    ``--policy.path``): the flags are put there for the duration of the call."""
    saved = sys.argv
    sys.argv = ["lerobot-train", *args]
    try:
        yield
    finally:
        sys.argv = saved


@contextlib.contextmanager
def lerobot_refusals(args: list[str], echo: bool, what: str) -> Iterator[None]:
    """LeRobot at work on ``args`` (as its ``sys.argv``): whatever it raises, its parser's exit included, becomes a
    UsageError naming what LeRobot said. ``echo``: LeRobot's usage and error reach stderr too."""
    with lerobot_argv(args), StderrCopy(sys.stderr, echo) as stderr:
        try:
            yield
        except SystemExit as exc:
            # LeRobot's parser has printed its usage and its own "error: ..." line; the latter says what is wrong.
            said = [line.strip() for line in stderr.text().splitlines() if line.strip()]
            start = max((i for i, line in enumerate(said) if "error:" in line), default=max(len(said) - 1, 0))
            reason = " ".join(said[start:]) or f"exit {exc.code}"
            raise UsageError(f"LeRobot rejected the training {what}: {reason}") from None
        except Exception as exc:  # draccus and validate() raise plain exceptions of many kinds
            raise UsageError(f"LeRobot rejected the training {what}: {exc}") from None


def parse_train_config(args: list[str], validate: bool, echo: bool = True):
    """Parse ``args`` exactly as ``lerobot-train`` would (and, with ``validate``, return the config LeRobot's
    ``validate()`` fills in); a rejected flag becomes a UsageError. ``echo``: as in ``lerobot_refusals``."""
    from lerobot.configs import parser
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.scripts import lerobot_train  # importing it registers every policy type

    lerobot_train.register_third_party_plugins()

    @parser.wrap()
    def _parsed(cfg: TrainPipelineConfig) -> TrainPipelineConfig:
        return cfg

    with lerobot_refusals(args, echo, "flags"):
        cfg = _parsed()
    return validated(cfg, args, echo) if validate else cfg


def validated(cfg, args: list[str], echo: bool = True, output_dir_checked: bool = False):
    """A copy of ``cfg`` (parsed from ``args``) as LeRobot's ``validate()`` fills it in; ``cfg`` stays as it was,
    since LeRobot's ``train`` validates its config itself. ``output_dir_checked``: the caller has refused an
    output dir that exists already (the driver does, before any cluster starts), so LeRobot's own check is left
    out: a worker group that Ray Train starts again would fail it on the dir the first one made."""
    checked = copy.deepcopy(cfg)
    if output_dir_checked:
        checked.output_dir = None
    with lerobot_refusals(args, echo, "config"):
        checked.validate()
    if output_dir_checked:
        checked.output_dir = cfg.output_dir
    return checked


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
    return Path(output_dir) / CHECKPOINTS


def newest_checkpoint(output_dir: Path) -> Path | None:
    """The step directory LeRobot's ``last`` link points at, or None before the first save."""
    last = checkpoints_dir(output_dir) / LAST
    return last.resolve() if last.exists() else None


def resume_flags(output_dir: Path, step_dir: str, steps: int) -> list[str]:
    """The flags that make ``lerobot-train`` resume from ``checkpoints/<step_dir>``."""
    config_path = checkpoints_dir(output_dir) / step_dir / PRETRAINED_MODEL / "train_config.json"
    return ["--resume=true", f"--config_path={config_path}", f"--output_dir={output_dir}", f"--steps={steps}"]


def resumed_step(args: list[str]) -> int | None:
    """The step a ``--resume=true --config_path=.../<step>/pretrained_model/train_config.json`` run starts from."""
    if (flag_value(args, "resume") or "").lower() != "true":
        return None
    config_path = flag_value(args, "config_path")
    if not config_path:
        return None
    step_dir = Path(config_path).parent.parent
    name = step_dir.resolve().name if step_dir.name == LAST else step_dir.name  # LeRobot's docs resume `last`
    if not (name.isascii() and name.isdigit()):
        raise UsageError(
            f"--config_path={config_path}: not a LeRobot checkpoint's config "
            "(checkpoints/<step>/pretrained_model/train_config.json, or checkpoints/last/...)"
        )
    return int(name)


class LoopHooks:
    """What an observer of LeRobot's loop may do; each method is a no-op unless overridden."""

    def before_step(self) -> None:
        """Before an optimizer step; raising here ends the loop before it touches any collective."""

    def after_step(self, step: int, loss: float, policy) -> None:
        """After optimizer step ``step`` (counted from 1), with its loss and the (possibly DDP-wrapped) model."""

    def logged(self, step: int, metrics: dict) -> None:
        """LeRobot has just logged ``step``: ``metrics`` are the numbers it printed (loss, grad_norm, lr,
        update_s, dataloading_s, samples_per_s, ...), already reduced across ranks."""

    def save_now(self, step: int) -> bool:
        """True: LeRobot saves ``step`` as a periodic checkpoint even off its ``--save_freq``."""
        return False

    def checkpoint_started(self, step_dir: Path) -> None:
        """This rank calls ``save_checkpoint`` of ``step_dir`` (only the main process on LeRobot 0.6.x)."""

    def checkpoint_written(self, step_dir: Path) -> None:
        """This rank's ``save_checkpoint`` of ``step_dir`` has returned: what this rank (and, the save being
        collective, every rank on its node) writes there is on disk. Only the main process on LeRobot 0.6.x."""

    def checkpoint_saved(self, step_dir: Path) -> None:
        """LeRobot has written ``step_dir`` whole and pointed ``last`` at it (main process only)."""

    def close(self) -> None:
        """The loop has ended, returned or raised."""


def loop_wrappers(originals: dict, hooks: Sequence[LoopHooks]) -> dict:
    """LeRobot's loop functions (``originals``, by name), each wrapped to tell ``hooks``."""
    seen = {}

    def update_policy(train_metrics, policy, *args, **kwargs):
        seen["tracker"] = train_metrics
        for hook in hooks:
            hook.before_step()
        result = originals["update_policy"](train_metrics, policy, *args, **kwargs)
        # LeRobot increments its tracker right after this returns: this step is steps + 1.
        for hook in hooks:
            hook.after_step(train_metrics.steps + 1, train_metrics.loss.val, policy)
        return result

    def should_save_checkpoint(step: int, save_freq: int, total_steps: int) -> bool:
        saves = originals["should_save_checkpoint"](step, save_freq, total_steps)
        return saves or any(hook.save_now(step) for hook in hooks)

    def save_checkpoint(checkpoint_dir, *args, **kwargs):
        for hook in hooks:
            hook.checkpoint_started(Path(checkpoint_dir))
        result = originals["save_checkpoint"](checkpoint_dir, *args, **kwargs)
        for hook in hooks:
            hook.checkpoint_written(Path(checkpoint_dir))
        return result

    def update_last_checkpoint(checkpoint_dir):
        result = originals["update_last_checkpoint"](checkpoint_dir)
        for hook in hooks:
            hook.checkpoint_saved(Path(checkpoint_dir))
        return result

    def reset_averages(tracker):
        if tracker is seen.get("tracker"):  # the training tracker, not an evaluation's
            metrics = tracker.to_dict()
            for hook in hooks:
                hook.logged(int(metrics["steps"]), metrics)
        return originals["reset_averages"](tracker)

    wrappers = (update_policy, should_save_checkpoint, save_checkpoint, update_last_checkpoint, reset_averages)
    return {wrapper.__name__: wrapper for wrapper in wrappers}


@contextlib.contextmanager
def hooked(hooks: Sequence[LoopHooks]) -> Iterator[None]:
    """``hooks`` see every step and checkpoint of the ``train`` run inside; LeRobot's loop is not copied."""
    from lerobot.scripts import lerobot_train
    from lerobot.utils.logging_utils import MetricsTracker

    from raycluster.lerobot.log_lines import LoggedProgress

    owners = {name: lerobot_train for name in (*LOOP_FUNCTIONS, "tqdm")} | {"reset_averages": MetricsTracker}
    originals = {name: getattr(owner, name) for name, owner in owners.items()}
    for name, wrapper in (loop_wrappers(originals, hooks) | {"tqdm": LoggedProgress}).items():
        setattr(owners[name], name, wrapper)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(owners[name], name, original)
        for hook in hooks:
            hook.close()


def run_main() -> None:
    """``lerobot-train`` itself, reading ``sys.argv`` (the benchmark's baseline)."""
    from lerobot.scripts import lerobot_train

    lerobot_train.main()


def validations(cfg) -> tuple[int, ...]:
    """Every how many steps LeRobot validates: in an env only when it has one (``--env_eval_freq``), on
    held-out data with ``--eval_steps`` (both lines)."""
    names = ("env_eval_freq",) if getattr(cfg, "env", None) is not None else ()
    return tuple(getattr(cfg, name, 0) or 0 for name in (*names, "eval_steps"))
