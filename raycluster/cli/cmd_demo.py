"""``raycluster demo``: record PushT episodes, train a tiny ACT on a private local Ray cluster, evaluating
every checkpoint meanwhile."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from raycluster.demo import DemoPlan


def register(verbs) -> None:
    parser = verbs.add_parser(
        "demo", help="the main job: PushT episodes, a local cluster, 2-worker ACT, every checkpoint evaluated"
    )
    parser.add_argument("--workdir", type=Path, default=Path("outputs/demo"))
    parser.add_argument("--steps", type=int, default=DemoPlan.steps)
    parser.add_argument("--num-workers", type=int, default=DemoPlan.num_workers)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.cluster_config import split_cluster_args
    from raycluster.lerobot.pusht_dataset import make_pusht_dataset
    from raycluster.training.driver.run import run_training

    plan = DemoPlan(workdir=args.workdir.resolve(), steps=args.steps, num_workers=args.num_workers)
    if not plan.dataset.root.exists():
        make_pusht_dataset(plan.dataset)
    output_dir = plan.workdir / "runs" / time.strftime("%Y%m%d-%H%M%S")
    cluster, lerobot_args = split_cluster_args(plan.train_flags(output_dir))
    summary = run_training(cluster, lerobot_args)
    print(json.dumps(asdict(summary), indent=2))
    if summary.curves:
        print(f"the run's picture (loss and samples/s over steps): {summary.curves}")
        print(f"its dashboard: .venv/bin/raycluster curves {os.path.relpath(output_dir)}")
    for evaluation in summary.evaluations:
        shown = ", ".join(f"{k} {v:.3g}" for k, v in evaluation["metrics"].items()) or evaluation["error"]
        print(f"checkpoint {evaluation['step']}: {shown}")
    if summary.best:
        print(f"best checkpoint: {summary.best['step']} ({summary.best['metric']} {summary.best['value']:.3g})")
    return 0
