"""``--only training``: the same short run (dataset, tiny ACT, seed, steps, world size 2) under plain torchrun +
LeRobot's ``train`` (``bench/plain_lerobot.py``) and under ``raycluster train``: loop samples/s and end-to-end
wall time; then the same run on a cluster that is already up (``raycluster up``, the interactive case)."""

from __future__ import annotations

import json
import sys

from bench.harness import BIN, Bench


def run(bench: Bench, part: str = "training") -> None:
    """Plain torchrun + LeRobot's ``train`` against ``raycluster train``: loop samples/s and end-to-end wall time."""
    wall, out = bench.run(
        [
            str(BIN / "torchrun"),
            f"--nproc-per-node={bench.workers}",
            "bench/plain_lerobot.py",
            *bench.flags,
            f"--steps={bench.steps}",
            f"--save_freq={bench.steps}",
            f"--log_freq={bench.steps}",
            f"--output_dir={bench.work / part / 'plain'}",
        ]
    )
    plain = json.loads(out.split("BENCH ", 1)[1].splitlines()[0]) | {"started": bench.started_at}
    ours = bench.raycluster(f"{part}/ray")
    if part == "training":
        bench.phases["torchrun"] = {k: v - plain["started"] for k, v in plain["at"].items()} | {"exited": wall}
        bench.phases["raycluster local"] = ours["phases"] | {"exited": ours["wall"]}
    bench.rows += [
        (
            part,
            "loop samples/s",
            plain["samples_per_s"],
            ours["samples_per_s"],
            f"{ours['samples_per_s'] / plain['samples_per_s']:.3f}",
            ">= 0.98",
        ),
        (part, "end-to-end wall s", wall, ours["wall"], f"{ours['wall'] - wall:+.1f} s", "<= +10 s"),
    ]
    if part == "training":
        running(bench, wall)


def running(bench: Bench, plain_wall: float) -> None:
    """The interactive case: the same run on a cluster that is already up (``raycluster up``)."""
    state, cli, saved = bench.work / "up", [sys.executable, "-m", "raycluster"], bench.env
    bench.run([*cli, "up", f"--state-dir={state}"])
    try:
        cluster = json.loads((state / "cluster.json").read_text())
        bench.env = {**saved, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": cluster["token_path"]}
        ours = bench.raycluster("running/ray", f"--cluster.address={cluster['address']}")
        _, out = bench.run([sys.executable, "bench/ray_train_floor.py", cluster["address"], str(bench.workers)])
        floor = json.loads(out.split("FLOOR ", 1)[1].splitlines()[0])
    finally:
        bench.env = saved
        bench.run([*cli, "down", f"--state-dir={state}"])
    bench.phases["raycluster running"] = ours["phases"] | {"exited": ours["wall"]}
    diff = f"{ours['wall'] - plain_wall:+.1f} s"
    bench.rows.append(("running", "end-to-end wall s", plain_wall, ours["wall"], diff, "<= +5 s"))
    # The floor under the running-cluster goal: Ray Train alone, a train function that does nothing, on the same
    # cluster, against torchrun's first step (LeRobot imported, set up, one step taken).
    first_step = bench.phases["torchrun"]["first_step"]
    gap = f"{floor['first_line'] - first_step:+.1f} s"
    bench.rows.append(("running", "s to the first line: torchrun's first step | Ray Train's no-op",
                       first_step, floor["first_line"], gap, ""))  # fmt: skip
    print(f"bench: Ray Train alone on the running cluster: a no-op train function began {floor['first_line']:.1f} s "
          f"after its command started, {floor['fit']:.1f} s after fit()", flush=True)  # fmt: skip
