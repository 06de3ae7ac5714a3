"""``raycluster up`` / ``raycluster down``: a local Ray head (token auth on) for the same job scripts."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from raycluster.local_cluster import DEFAULT_STATE_DIR


def register(verbs) -> None:
    up = verbs.add_parser("up", help="start a local Ray head with token authentication")
    up.add_argument("--num-cpus", type=int)
    up.add_argument("--num-gpus", type=int, default=0)
    up.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    up.set_defaults(run=run_up)
    down = verbs.add_parser("down", help="stop the local Ray head `raycluster up` started (by PID)")
    down.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    down.set_defaults(run=run_down)


def run_up(args: argparse.Namespace) -> int:
    from raycluster.local_cluster import up

    cluster = up(args.state_dir, args.num_cpus, args.num_gpus)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in cluster.client_env().items() if k != "RAY_ADDRESS")
    print(f"Ray head up (pid {cluster.pid})")
    print(f"  dashboard:  {cluster.dashboard_url}  (sign in with the token in {cluster.token_path})")
    print(f"  token:      {cluster.token_path}")
    ray = shlex.quote(str(Path(sys.executable).with_name("ray")))  # this environment's, activated or not
    print(
        f"  submit:     {env} {ray} job submit --address {cluster.dashboard_url} --working-dir . -- "
        "python jobs/train_lerobot.py --cluster.num_workers=2 --output_dir=$PWD/outputs/<run> <lerobot flags, "
        "absolute paths>"
    )
    print(
        "  stop:       raycluster down"
        + (f" --state-dir {args.state_dir}" if args.state_dir != DEFAULT_STATE_DIR else "")
    )
    return 0


def run_down(args: argparse.Namespace) -> int:
    from raycluster.local_cluster import down

    cluster = down(args.state_dir)
    print(f"Ray head (pid {cluster.pid}) stopped")
    return 0
