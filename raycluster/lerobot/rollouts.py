"""Rollouts in the run's simulation (``--env.type``) through LeRobot's own ``eval_policy_all``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from raycluster.lerobot.policy_loading import load_policy

AGGREGATES = ("pc_success", "avg_sum_reward", "avg_max_reward", "n_episodes")


def rollout_metrics(cfg, device: str) -> dict[str, float]:
    """``--eval.n_episodes`` episodes from ``--seed``, as LeRobot's training evaluates (no videos). The envs
    step in this process (no async workers): the task takes no more of the node's CPUs than it holds."""
    import torch
    from lerobot.envs import close_envs, make_env, make_env_pre_post_processors
    from lerobot.scripts.lerobot_eval import eval_policy_all

    loaded = load_policy(cfg, device)
    env_pre, env_post = make_env_pre_post_processors(env_cfg=cfg.env, policy_cfg=cfg.policy)
    # LeRobot sized eval.batch_size from the cores of the machine that parsed the flags, not of this task's.
    n_envs = max(1, min(cfg.eval.n_episodes, cfg.eval.batch_size or cfg.eval.n_episodes, 8))
    envs = make_env(cfg.env, n_envs=n_envs, use_async_envs=False)
    try:
        with torch.no_grad(), no_progress_bars():
            info = eval_policy_all(
                envs=envs,
                policy=loaded.policy,
                env_preprocessor=env_pre,
                env_postprocessor=env_post,
                preprocessor=loaded.preprocessor,
                postprocessor=loaded.postprocessor,
                n_episodes=cfg.eval.n_episodes,
                max_episodes_rendered=0,
                start_seed=cfg.seed,
                max_parallel_tasks=cfg.env.max_parallel_tasks,
            )
    finally:
        close_envs(envs)
    return {name: float(info["overall"][name]) for name in AGGREGATES}


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """LeRobot's rollout bar (its ``trange``) redraws at every env step, and Ray forwards each redraw as a log
    line: hundreds per evaluation. The task logs its outcome once instead; LeRobot's warnings and logging, on
    stderr like the bar, still reach the log."""
    from lerobot.scripts import lerobot_eval

    bar = lerobot_eval.trange
    lerobot_eval.trange = lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True})
    try:
        yield
    finally:
        lerobot_eval.trange = bar
