"""The W&B run LeRobot leaves open, finished when the loop ends; W&B's SageMaker naming kept off."""

import wandb
from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal.datastore import DataStore

from raycluster.sagemaker.job_env import tracker_env
from raycluster.training.worker.tracker import STOPPED_EXIT_CODE, TrackerEnd


def record_kinds(run_dir) -> dict[str, wandb_internal_pb2.Record]:
    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    store, kinds = DataStore(), {}
    store.open_for_scan(str(path))
    while (data := store.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kinds[record.WhichOneof("record_type")] = record
    return kinds


def test_a_run_left_open_by_a_stopped_loop_is_finished_as_preempted(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    run = wandb.init(project="raycluster-test", dir=tmp_path)
    run.log({"train/loss": 1.0}, step=1)
    end = TrackerEnd()
    end.begin(stopped=True, failed=False)
    end.wait()
    assert wandb.run is None
    kinds = record_kinds(tmp_path)
    assert "preempting" in kinds and kinds["exit"].exit.exit_code == STOPPED_EXIT_CODE and "history" in kinds
    nothing = TrackerEnd()  # no run: nothing to finish, nothing to wait for
    nothing.begin(stopped=False, failed=True)
    nothing.wait()


def test_a_run_of_a_failed_loop_is_finished_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    wandb.init(project="raycluster-test", dir=tmp_path)
    end = TrackerEnd()
    end.begin(stopped=False, failed=True)
    end.wait()
    kinds = record_kinds(tmp_path)
    assert wandb.run is None and kinds["exit"].exit.exit_code == 1 and "preempting" not in kinds


def test_wandb_names_no_run_after_the_sagemaker_job_unless_the_job_says_so():
    assert tracker_env({}) == {"WANDB_SAGEMAKER_DISABLE": "true"}
    assert tracker_env({"WANDB_SAGEMAKER_DISABLE": "false"}) == {}
