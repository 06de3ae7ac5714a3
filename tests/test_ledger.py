"""The ledger of a job's time (no Ray: its plain parts): each start's parts follow one another and add up to its
wall time, steps redone within a start and between starts, the goodput, and a ledger that cannot be read."""

import json
import time
from dataclasses import asdict

import psutil

from raycluster.ledger import (
    LEDGER_NAME,
    AttemptSteps,
    Ledger,
    keep_start,
    ledger_path,
    process_started,
    read_ledger,
    start_entry,
)

# A start as the summary's timeline has it, in seconds since the command started.
PHASES = {"flags_checked": 7.0, "cluster_ready": 11.0, "first_step": 40.0, "last_step": 140.0, "summary_written": 150.0}
# Training returned 2 s after the last step, and the evaluations still running then took 5 s more.
PHASES |= {"training_returned": 142.0, "evaluations_done": 147.0}


def test_a_starts_parts_follow_one_another_and_add_up_to_its_wall_time():
    # The container began 20 s before the command; one restart took 30 s of the training's 100 s.
    restart = [{"failure_seen": 80.0, "first_resumed_step": 110.0, "seconds": 30.0}]
    # Each group's loop was blocked saving checkpoints between its steps (4 s, 8 s): out of the training.
    groups = [AttemptSteps(resumed_from=0, reached=70, checkpoints_s=4.0), AttemptSteps(60, 150, checkpoints_s=8.0)]
    # Of the 20 s before the command, its environment took 6 (restored, or installed).
    entry = start_entry(1000.0, 1020.0, PHASES, restart, groups, environment_s=6.0)
    assert entry.parts == {
        "environment": 6.0,
        "before_command": 14.0,
        "start_up": 40.0,
        "training": 58.0,
        "checkpoints": 12.0,
        "recovery": 30.0,
        "evaluation": 5.0,
        "teardown": 5.0,
    }
    assert sum(entry.parts.values()) == entry.wall_s == 170.0
    # The first group trained 1-70; the second resumed from checkpoint 60 and trained 61-150: 61-70 twice.
    assert (entry.first_step, entry.last_step, entry.steps_trained, entry.steps_redone) == (0, 150, 160, 10)


def test_a_start_stopped_before_its_first_step_is_start_up_and_teardown_alone():
    entry = start_entry(1000.0, 1000.0, {"cluster_ready": 9.0, "summary_written": 25.0}, [], [])
    assert entry.parts == {
        "environment": 0.0, "before_command": 0.0, "start_up": 25.0, "training": 0.0, "checkpoints": 0.0,
        "recovery": 0.0, "evaluation": 0.0, "teardown": 0.0,
    }  # fmt: skip
    assert entry.wall_s == 25.0 and entry.steps_trained == 0


def test_a_restarted_job_counts_the_steps_its_last_start_did_beyond_the_checkpoint_it_resumed_from():
    first = start_entry(0.0, 0.0, PHASES, [], [AttemptSteps(0, 100)])
    resumed_at_the_stop = start_entry(500.0, 500.0, PHASES, [], [AttemptSteps(100, 200)])
    assert Ledger([first, resumed_at_the_stop]).steps_redone == 0  # the stop saved the step reached
    resumed_earlier = start_entry(500.0, 500.0, PHASES, [], [AttemptSteps(90, 200)])
    ledger = Ledger([first, resumed_earlier])
    assert ledger.steps_redone == 10  # a checkpoint 10 steps before the stop: 91-100 trained twice
    # 210 steps trained in 200 s of training, 200 kept, over 300 s of wall time.
    assert ledger.goodput == round(200 * 200 / 210 / 300, 4)


def test_the_ledger_is_kept_beside_the_checkpoints_and_a_restart_continues_it(tmp_path):
    assert ledger_path(str(tmp_path / "ckpt"), tmp_path / "out") == tmp_path / "ckpt" / LEDGER_NAME
    assert ledger_path("s3://bucket/ckpt", tmp_path / "out") == tmp_path / "out" / LEDGER_NAME
    assert ledger_path("", tmp_path / "out") == tmp_path / "out" / LEDGER_NAME
    path = tmp_path / "ckpt" / LEDGER_NAME
    keep_start(path, start_entry(0.0, 0.0, PHASES, [], [AttemptSteps(0, 100)]))
    scratch = tmp_path / "staging"  # where the partial file is written: SageMaker syncs the checkpoints' folder
    scratch.mkdir()
    kept = keep_start(path, start_entry(500.0, 500.0, PHASES, [], [AttemptSteps(100, 200)]), scratch)
    assert json.loads(path.read_text()) == kept and [s["first_step"] for s in kept["starts"]] == [0, 100]
    assert kept["steps_redone"] == 0 and len(kept["starts"]) == 2 and read_ledger(path).goodput == kept["goodput"]
    assert "ledger: 2 start(s), 300.0s in all:" in read_ledger(path).line() and kept["goodput"] == 0.6667
    assert sorted(p.name for p in path.parent.iterdir()) == [LEDGER_NAME]  # nothing partial beside it


def test_a_ledger_that_cannot_be_read_is_kept_aside_and_a_new_one_begins(tmp_path):
    path = tmp_path / LEDGER_NAME
    path.write_text('{"starts": [{"started_at": 1')  # cut short
    assert read_ledger(path) == Ledger()
    [aside] = tmp_path.glob(f"{LEDGER_NAME}.unreadable-*")
    assert aside.read_text() == '{"starts": [{"started_at": 1'  # nothing lost
    aside.unlink()
    entry = asdict(start_entry(0.0, 0.0, PHASES, [], [AttemptSteps(0, 100)]))
    path.write_text(json.dumps({"starts": [entry | {"parts": None}]}))  # whole JSON, not a ledger
    assert read_ledger(path) == Ledger() and len(list(tmp_path.glob(f"{LEDGER_NAME}.unreadable-*"))) == 1


def test_the_command_started_when_this_process_did_and_the_container_when_its_first_process_did():
    started = process_started()
    assert started < time.time() and abs(started - psutil.Process().create_time()) < 1.5
    assert abs(process_started(1) - psutil.Process(1).create_time()) < 1.5


def test_a_first_group_that_failed_before_its_first_step_leaves_the_training_to_the_next():
    restart = [{"failure_seen": 30.0, "first_resumed_step": 60.0, "seconds": 30.0}]
    phases = {"cluster_ready": 9.0, "last_step": 140.0, "summary_written": 150.0}
    entry = start_entry(0.0, 0.0, phases, restart, [AttemptSteps(0, 0), AttemptSteps(0, 100)])
    # The failure came before the training began: its recovery is start-up, and the training is the second group's.
    assert entry.parts == {
        "environment": 0.0, "before_command": 0.0, "start_up": 60.0, "training": 80.0, "checkpoints": 0.0,
        "recovery": 0.0, "evaluation": 0.0, "teardown": 10.0,
    }  # fmt: skip
    assert (entry.steps_trained, entry.steps_redone) == (100, 0)


def test_steps_redone_count_what_was_trained_beyond_the_progress_made_whichever_group_redid_it():
    # The second group resumed from 50, failed there; the third resumed from a newer checkpoint, 90.
    groups = [AttemptSteps(0, 100), AttemptSteps(50, 50), AttemptSteps(90, 200)]
    entry = start_entry(0.0, 0.0, PHASES, [], groups)
    assert (entry.steps_trained, entry.steps_redone) == (210, 10)
    # A start in which no group agreed on where to start trained nothing and is passed over between starts.
    empty = start_entry(0.0, 0.0, {"summary_written": 20.0}, [], [])
    after = start_entry(0.0, 0.0, PHASES, [], [AttemptSteps(200, 300)])
    assert empty.first_step is None and Ledger([entry, empty, after]).steps_redone == 10
