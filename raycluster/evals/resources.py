"""``--cluster.eval_resources`` as Ray's task options (no Ray needed)."""

from __future__ import annotations

import json
import math

from raycluster.errors import UsageError

BEST_METRICS = {"eval_loss": min, "pc_success": max, "avg_sum_reward": max, "avg_max_reward": max}
"""``--cluster.keep_best``'s names, and which way is better."""
HELD_OUT_METRICS = ("eval_loss",)
# Ray takes CPUs, GPUs and memory as keywords of their own and refuses them inside ``resources``.
KEYWORDS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}
FLAG = "--cluster.eval_resources"


def task_options(text: str) -> dict:
    """``{"CPU": 2, "group:cpu": 1}`` -> ``{"num_cpus": 2, "resources": {"group:cpu": 1}}``. A task takes one CPU
    unless told otherwise (Ray's default), so ``{"group:cpu": 1}`` also holds one CPU of that host."""
    try:
        asked = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{FLAG}={text!r} is not JSON ({exc}); e.g. '{{\"CPU\": 1}}' or '{{\"GPU\": 1}}'") from None
    if not isinstance(asked, dict) or not asked:
        raise UsageError(f"{FLAG}={text!r}: a JSON object of resource names and amounts, e.g. '{{\"CPU\": 1}}'")
    options: dict = {"resources": {}}
    for name, amount in asked.items():
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount < 0:
            raise UsageError(f"{FLAG}: {name!r} must be a finite number >= 0, got {amount!r}")
        if "_group_" in name:  # Ray reads such names as a placement group's own resources
            raise UsageError(f"{FLAG}: {name!r} is a placement group's resource name; use e.g. group:<name>")
        if name in KEYWORDS:
            options[KEYWORDS[name]] = amount
        else:
            options["resources"][name] = amount
    return options


def wanted(options: dict) -> dict[str, float]:
    """The amounts a task asks of a node, as ``ray.cluster_resources()`` names them."""
    asked = {"CPU": options.get("num_cpus", 1), **options["resources"]}
    for name in ("GPU", "memory"):
        if options.get(KEYWORDS[name]):
            asked[name] = options[KEYWORDS[name]]
    return {name: amount for name, amount in asked.items() if amount}
