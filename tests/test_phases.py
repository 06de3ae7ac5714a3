"""How a run's recorded phases become the summary's ``phases`` and ``recoveries`` (the runs themselves are
checked in test_train_local.py and test_checkpoints.py)."""

from pathlib import Path

from raycluster.training.phases import RECOVERY, START_UP, LoopPhases, Phase, timeline


def test_a_run_with_one_restart_files_each_phase_under_its_attempt():
    at = {name: float(i) for i, name in enumerate(START_UP[:4], 1)}
    recorded = [Phase(name, 100 + t, 0 if name in ("flags_checked", "cluster_ready") else 1) for name, t in at.items()]
    recorded += [
        Phase("lerobot_set_up", 105, 1),
        Phase("first_step", 106, 1, step=1),
        Phase("failure_seen", 110, 1),
        Phase("failure_seen", 110.5, 1),  # the controller may see the same failure twice: the first counts
        Phase("worker_group_ready", 114, 2),
        Phase("start_agreed", 115, 2, step=5),
        Phase("lerobot_set_up", 116, 2),
        Phase("first_step", 117, 2, step=6),
        Phase("last_step", 120, 2, step=30),
        Phase("final_checkpoint_published", 121, 2),
        Phase("training_returned", 122, 0),
        Phase("evaluations_done", 122.5, 0),
        Phase("summary_written", 123, 0),
    ]
    times = timeline(recorded, started=100)
    assert list(times.phases) == list(START_UP)
    assert times.phases["first_step"] == 6 and times.phases["last_step"] == 20 and times.phases["summary_written"] == 23
    assert times.recoveries == [
        dict(zip(RECOVERY, (10.0, 14.0, 15.0, 16.0, 17.0), strict=True)) | {"seconds": 7.0},
    ]


def test_a_run_without_restarts_has_no_recoveries():
    recorded = [Phase(name, 50 + i, 1) for i, name in enumerate(START_UP)]
    times = timeline(recorded, started=50)
    assert times.recoveries == [] and list(times.phases.values()) == [float(i) for i in range(len(START_UP))]


def test_the_loop_blocked_on_a_save_between_two_steps_is_counted_at_the_next_and_the_last_save_is_not():
    now, saved = [0.0], []
    phases = LoopPhases(
        lambda phase: None, attempt=2, saved=lambda attempt, s: saved.append((attempt, s)), clock=lambda: now[0]
    )
    for step, save_s in ((1, 0.0), (2, 3.0), (3, 0.0), (4, 5.0)):  # saves after steps 2 and 4, the run's last
        phases.before_step()
        now[0] += 1.0
        phases.after_step(step, loss=0.1, policy=None)
        if save_s:
            phases.checkpoint_started(Path(f"{step:06d}"))
            now[0] += save_s
            phases.checkpoint_saved(Path(f"{step:06d}"))
    assert saved == [(2, 3.0)]  # said at step 3; the save after the last step is the teardown's
