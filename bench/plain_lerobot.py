"""The baseline: LeRobot's own ``lerobot-train`` entry under torchrun, timed the way raycluster times it.

    torchrun --nproc-per-node=2 bench/plain_lerobot.py <lerobot-train flags>

Only the timers are added (the same StepRecorder the Ray workers use, and the time.time() when LeRobot's
first step began, its first step and its last step ended, at the same hook points raycluster's rank 0
records them); nothing else differs.
"""

import json
import os
import sys
import time

from raycluster.training import lerobot_api
from raycluster.training.recorder import StepRecorder


class Times(lerobot_api.LoopHooks):
    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def before_step(self) -> None:
        self.at.setdefault("lerobot_set_up", time.time())

    def after_step(self, step: int, loss: float, policy) -> None:
        self.at.setdefault("first_step", time.time())
        self.at["last_step"] = time.time()


if __name__ == "__main__":
    world = int(os.environ.get("WORLD_SIZE", "1"))
    batch = next(int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--batch_size="))
    recorder = StepRecorder(samples_per_step=batch * world, report_every=10**9, report=lambda metrics: None)
    times = Times()
    with lerobot_api.hooked([recorder, times]):
        lerobot_api.run_main()
    if os.environ.get("RANK", "0") == "0":
        print(
            "BENCH "
            + json.dumps({"samples_per_s": recorder.samples_per_s, "final_step": recorder.last_step, "at": times.at})
        )
