"""What a person reads: the demo's log has LeRobot's step lines and a progress line per interval, not a
line per step, and none of Ray Train's per-report lines."""

import re
from collections import Counter

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow


def test_the_demos_log_has_a_progress_line_per_interval_and_every_step_line_lerobot_logs(tmp_path):
    steps = 30
    result = run_cli("demo", f"--workdir={tmp_path / 'demo'}", f"--steps={steps}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    lines = (result.stdout + result.stderr).splitlines()
    progress = [line for line in lines if "Training:" in line]
    assert 1 <= len(progress) <= 4, progress  # 0%, one every 30 s, the last; under Ray's own tqdm, one per step
    assert f"{steps}/{steps}" in progress[-1]
    assert not [line for line in lines if "Reporting training result" in line]
    logged = sorted({int(m.group(1)) for line in lines if (m := re.search(r"step:(\d+) ", line))})
    assert logged == [10, 20, 30]  # LeRobot's own lines, every --log_freq step (the demo's is 10)
    # Its one checkpoint evaluated apart, on the CPU the workers leave: held-out loss and PushT rollouts.
    evaluated = [line for line in lines if "evaluation of checkpoint 000030: eval_loss" in line]
    assert len(evaluated) == 1 and re.search(r"pc_success [0-9.]+, avg_sum_reward [0-9.e-]+", evaluated[0]), lines[-40:]
    assert "best checkpoint: 30 (eval_loss" in result.stdout
    # The lines by origin (Ray's "(name pid=...)" prefix; the driver's own have none): the evaluation says its
    # outcome, not a progress bar's every redraw (those were 731 of the demo's 1,243 lines).
    origins = Counter(m.group(1) if (m := re.search(r"\((\w+) pid=", line)) else "driver" for line in lines)
    print(f"{len(lines)} lines by origin: {dict(origins)}")
    assert not [line for line in lines if "Running rollout with at most" in line or "eval batches" in line]
    assert origins["evaluate_checkpoint"] <= 20, origins
