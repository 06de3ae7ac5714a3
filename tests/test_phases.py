"""How a run's recorded phases become the summary's ``phases`` and ``recoveries`` (the runs themselves are
checked in test_train_local.py and test_checkpoints.py)."""

from raycluster.training.phases import RECOVERY, START_UP, Phase, timeline


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
