"""The evaluation flags, plan and records, without a cluster: what is refused, what Ray is asked for, which
checkpoint is best, and where instance groups become Ray resources."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from conftest import COMMON, TINY_ACT, dataset_flags
from raycluster.bootstrap import NodeSpec
from raycluster.cluster_config import ClusterConfig
from raycluster.errors import UsageError
from raycluster.evals.book import Admission, EvalBook, kept_best
from raycluster.evals.plan import inline_off, plan_for_run
from raycluster.evals.records import FAILED, SKIPPED, VALIDATED, EvalRecord, curve_metrics
from raycluster.evals.resources import task_options, wanted
from raycluster.launch.requirements import requirements
from raycluster.lerobot.api import parse_train_config
from raycluster.lerobot.flags import read_flags
from raycluster.sagemaker.host_node import group_resources
from raycluster.sagemaker.topology import Topology
from raycluster.sim.opt_ml import instance_groups


def test_eval_resources_become_rays_task_options():
    assert task_options('{"CPU": 2}') == {"num_cpus": 2, "resources": {}}
    assert task_options('{"GPU": 1, "memory": 1e9}') == {"num_gpus": 1, "memory": 1e9, "resources": {}}
    options = task_options('{"group:eval": 1}')
    assert options == {"resources": {"group:eval": 1}}
    assert wanted(options) == {"CPU": 1, "group:eval": 1}  # a task holds one CPU unless told otherwise
    assert wanted(task_options('{"CPU": 0, "GPU": 1}')) == {"GPU": 1}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("CPU", "is not JSON"),
        ("[1]", "a JSON object of resource names and amounts"),
        ("{}", "a JSON object of resource names and amounts"),
        ('{"CPU": -1}', "'CPU' must be a finite number >= 0"),
        ('{"CPU": true}', "'CPU' must be a finite number >= 0"),
        ('{"CPU": "1"}', "'CPU' must be a finite number >= 0"),
        ('{"bundle_group_0": 1}', "a placement group's resource name"),
    ],
)
def test_bad_eval_resources_are_refused_naming_the_flag(text, said):
    with pytest.raises(UsageError, match="--cluster.eval_resources") as refused:
        ClusterConfig(eval_resources=text).check()
    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"keep_best": "accuracy"}, "not a metric; one of eval_loss (lower is better), pc_success (higher"),
        ({"keep_best": "eval_loss"}, "needs --cluster.async_eval=true"),
        ({"async_eval": True}, "give --cluster.checkpoint_dir"),
        ({"eval_timeout_s": 0.0}, "--cluster.eval_timeout_s must be a number of seconds > 0"),
    ],
)
def test_evaluation_flags_out_of_range_are_refused(settings, said):
    with pytest.raises(UsageError) as refused:
        ClusterConfig(**settings).check()
    assert said in str(refused.value)


def lerobot_flags(dataset, *flags: str) -> list[str]:
    return inline_off([*dataset_flags(dataset), *TINY_ACT, *COMMON, *flags])


ASYNC = ClusterConfig(async_eval=True, checkpoint_dir="/ckpt")


def test_the_plan_follows_lerobots_flags_and_turns_its_inline_evaluations_off(dataset):
    args = lerobot_flags(
        dataset, "--dataset.eval_split=0.25", "--env.type=pusht", "--eval_steps=5", "--env_eval_freq=5"
    )
    cfg = parse_train_config(args, validate=True)
    assert (cfg.eval_steps, cfg.env_eval_freq) == (0, 0)  # LeRobot's loop evaluates nothing itself
    # The driver plans from the flags as it reads them without LeRobot; they agree with what LeRobot resolved.
    flags = read_flags(args, dt.datetime.now())
    assert (flags.eval_split, flags.has_env, flags.save_checkpoint) == (
        cfg.dataset.eval_split,
        True,
        cfg.save_checkpoint,
    )
    plan = plan_for_run(ClusterConfig(async_eval=True, checkpoint_dir="/c", keep_best="pc_success").evals(), flags)
    assert plan.held_out and plan.rollouts and plan.metric == "pc_success" and plan.device == "cpu"
    assert plan_for_run(ClusterConfig().evals(), flags) is None


@pytest.mark.parametrize(
    ("flags", "settings", "said"),
    [
        ((), {}, "has nothing to evaluate: give --dataset.eval_split=0.1"),
        (("--env.type=pusht", "--save_checkpoint=false"), {}, "drop --save_checkpoint=false"),
        (("--env.type=pusht",), {"keep_best": "eval_loss"}, "needs held-out episodes: give --dataset.eval_split"),
        (("--dataset.eval_split=0.25",), {"keep_best": "avg_sum_reward"}, "a rollouts' metric: give --env.type"),
    ],
)
def test_a_plan_that_cannot_be_kept_is_refused_before_any_cluster(dataset, flags, settings, said):
    cluster = ClusterConfig(async_eval=True, checkpoint_dir="/c", **settings)
    with pytest.raises(UsageError) as refused:
        plan_for_run(cluster.evals(), read_flags(lerobot_flags(dataset, *flags), dt.datetime.now()))
    assert said in str(refused.value)


def record(name: str, loss: float | None = None, status: str = VALIDATED) -> EvalRecord:
    return EvalRecord(name, status, {"eval_loss": loss} if loss is not None else {}, 1.0, "10.0.0.3")


def test_the_best_is_kept_and_the_one_it_replaces_released():
    best, released = kept_best(None, record("000002", 0.5), "eval_loss")
    assert best.checkpoint == "000002" and released is None
    best, released = kept_best(best, record("000004", 0.7), "eval_loss")  # worse: itself released
    assert best.checkpoint == "000002" and released == "000004"
    best, released = kept_best(best, record("000006", 0.5), "eval_loss")  # a tie keeps the earlier one
    assert best.checkpoint == "000002" and released == "000006"
    best, released = kept_best(best, record("000008", None, FAILED), "eval_loss")  # no metric: never best
    assert best.checkpoint == "000002" and released == "000008"
    best, released = kept_best(best, record("000010", 0.1), "eval_loss")
    assert best.checkpoint == "000010" and released == "000002"
    higher = EvalRecord("000012", VALIDATED, {"pc_success": 40.0})
    assert kept_best(EvalRecord("000010", VALIDATED, {"pc_success": 20.0}), higher, "pc_success")[0] is higher
    assert kept_best(None, record("000002", 0.5), "")[1] == "000002"  # no --cluster.keep_best: nothing held


def test_the_oldest_waiting_evaluations_give_way_even_to_an_announcement_that_came_late():
    book = EvalBook("eval_loss", timeout_s=60.0, waiting_limit=2)

    def admit(name: str) -> Admission:  # as the keeper does: the skipped ones are settled at once
        admission = book.admit(name)
        for skipped in admission.skip:
            assert book.settle(EvalRecord(skipped, SKIPPED), now=0.0) == (True, skipped)
        return admission

    assert admit("000004").submit and book.started("000004", "10.0.0.3", now=0.0)  # the one slot, taken
    assert admit("000006") == Admission(submit=True, newest="000006")
    assert admit("000008") == Admission(submit=True, newest="000008")
    # 000002's announcement comes late, after newer ones: it is the one skipped, not 000006.
    assert admit("000002") == Admission(submit=False, skip=["000002"], newest="000008")
    assert admit("000010") == Admission(submit=True, skip=["000006"], newest="000010")
    # A task skipped while it waited for its slot is told not to run; one that began is told so again.
    assert not book.started("000006", "10.0.0.3", now=1.0) and book.started("000004", "10.0.0.3", now=2.0)
    assert book.running() == {"000004": (0.0, "10.0.0.3")}
    assert sorted(book.unsettled()) == ["000004", "000008", "000010"]


def test_a_record_is_one_log_line_and_its_curves_points_a_panel_family_of_their_own():
    done = EvalRecord(
        "000010", VALIDATED, {"eval_loss": 0.25, "eval_frames": 60.0, "pc_success": 50.0}, 3.2, "10.0.0.3"
    )
    assert (
        done.log_line()
        == "evaluation of checkpoint 000010: eval_loss 0.25, eval_frames 60, pc_success 50 (3.2s on 10.0.0.3)"
    )
    assert curve_metrics(done) == {"eval/loss": 0.25, "eval/pc_success": 50.0}
    failed = EvalRecord("000020", FAILED, error="RuntimeError: boom")
    assert failed.log_line() == "evaluation of checkpoint 000020: VALIDATION_FAILED: RuntimeError: boom"
    assert failed.as_summary()["step"] == 20 and curve_metrics(failed) == {}


def test_a_job_that_rolls_out_in_pusht_installs_its_simulation_and_no_other_does():
    assert "lerobot[pusht]==0.6.1" in requirements("pusht")
    assert not [r for r in requirements() if "pusht" in r] and requirements("aloha") == requirements()


def test_each_hosts_instance_group_becomes_a_ray_resource_on_its_node():
    request = {"ResourceConfig": {"InstanceGroups": [
        {"InstanceGroupName": "train", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "eval", "InstanceType": "ml.c7i.8xlarge", "InstanceCount": 1},
    ]}}  # fmt: skip
    groups = instance_groups(request, ["algo-1", "algo-2", "algo-3"])
    assert [(g["instance_group_name"], g["hosts"]) for g in groups] == [
        ("train", ["algo-1", "algo-2"]),
        ("eval", ["algo-3"]),
    ]
    topology = Topology(
        base=Path("/opt/ml"), hosts=("algo-1", "algo-2", "algo-3"), current_host="algo-3", head_host="algo-1",
        num_gpus=0, num_cpus=32, hyperparameters={}, channels={}, network_interface="eth0",
        instance_type="ml.c7i.8xlarge", instance_groups={g["instance_group_name"]: tuple(g["hosts"]) for g in groups},
    )  # fmt: skip
    assert topology.current_group == "eval" and group_resources(topology) == {"group:eval": 32.0}
    command = NodeSpec("10.0.0.3", 32, 0, Path("/tmp/ray"), "10.0.0.1:6379", resources={"group:eval": 32.0}).command()
    assert json.loads(next(c for c in command if c.startswith("--resources=")).split("=", 1)[1]) == {"group:eval": 32.0}
    with pytest.raises(UsageError, match="hold 3 hosts, not 4"):
        instance_groups(request, ["algo-1", "algo-2", "algo-3", "algo-4"])
