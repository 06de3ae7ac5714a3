"""What every checkpoint's evaluation runs, decided once on the driver from LeRobot's flags and ours."""

from __future__ import annotations

from dataclasses import dataclass, field

from raycluster.errors import UsageError
from raycluster.evals.resources import HELD_OUT_METRICS, task_options
from raycluster.evals.settings import EvalSettings
from raycluster.lerobot.flags import TrainFlags

INLINE_OFF = ("--eval_steps=0", "--env_eval_freq=0")
"""LeRobot's own evaluations inside its loop (the same names in 0.6.x and main); the last flag given wins."""


@dataclass(frozen=True)
class EvalPlan:
    held_out: bool
    """LeRobot's loss on the held-out episodes of ``--dataset.eval_split`` (``--max_eval_samples`` caps it)."""
    rollouts: bool
    """LeRobot's ``eval_policy_all`` in ``--env.type``'s simulation, ``--eval.n_episodes`` episodes."""
    options: dict = field(default_factory=dict)
    """Each task's Ray options (``resources.task_options``)."""
    timeout_s: float = 1800.0
    metric: str = ""
    """``--cluster.keep_best`` (empty: none)."""

    @property
    def device(self) -> str:
        return "cuda" if self.options.get("num_gpus") else "cpu"


def plan_for_run(settings: EvalSettings, flags: TrainFlags) -> EvalPlan | None:
    """The run's evaluation plan (None without ``--cluster.async_eval``); a run that asks for evaluations it
    cannot get is refused here, before any cluster starts."""
    if not settings.enabled:
        return None
    plan = EvalPlan(
        held_out=flags.eval_split > 0,
        rollouts=flags.has_env,
        options=task_options(settings.resources),
        timeout_s=settings.timeout_s,
        metric=settings.keep_best,
    )
    if not (plan.held_out or plan.rollouts):
        raise UsageError(
            "--cluster.async_eval=true has nothing to evaluate: give --dataset.eval_split=0.1 (the loss on held-out "
            "episodes) and/or --env.type=pusht (rollouts in a simulation)"
        )
    if not flags.save_checkpoint:
        raise UsageError("--cluster.async_eval=true evaluates checkpoints: drop --save_checkpoint=false")
    if plan.metric in HELD_OUT_METRICS and not plan.held_out:
        raise UsageError(f"--cluster.keep_best={plan.metric} needs held-out episodes: give --dataset.eval_split=0.1")
    if plan.metric and plan.metric not in HELD_OUT_METRICS and not plan.rollouts:
        raise UsageError(f"--cluster.keep_best={plan.metric} is a rollouts' metric: give --env.type=pusht")
    return plan


def inline_off(args: list[str]) -> list[str]:
    """LeRobot's flags with its inline evaluations off: every checkpoint is evaluated apart instead."""
    return [*args, *INLINE_OFF]
