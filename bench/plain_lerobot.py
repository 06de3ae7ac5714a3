"""The baseline: LeRobot's own ``lerobot-train`` entry under torchrun, timed the way raycluster times it.

    torchrun --nproc-per-node=2 bench/plain_lerobot.py <lerobot-train flags>

Only the timers are added (the same StepRecorder and LoopPhases raycluster's rank 0 runs: loop throughput,
and when LeRobot's first step began, its first and its last step ended); nothing else differs.
"""

import json
import os
import sys

from raycluster.lerobot import api as lerobot_api
from raycluster.training.phases import LoopPhases
from raycluster.training.worker.recorder import StepRecorder

if __name__ == "__main__":
    world = int(os.environ.get("WORLD_SIZE", "1"))
    batch = next(int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--batch_size="))
    recorder = StepRecorder(samples_per_step=batch * world, report_every=10**9, report=lambda metrics: None)
    phases = []
    with lerobot_api.hooked([recorder, LoopPhases(phases.append, attempt=1)]):
        lerobot_api.run_main()
    if os.environ.get("RANK", "0") == "0":
        at = {phase.name: phase.at for phase in phases}
        print(
            "BENCH " + json.dumps({"samples_per_s": recorder.samples_per_s, "final_step": recorder.last_step, "at": at})
        )
