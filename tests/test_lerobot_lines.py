"""What each LeRobot line makes of our flags, before any worker starts and on every rank: pure planning, so
it is checked here under whichever LeRobot is installed (LeRobot main itself runs in test_lerobot_main.py)."""

from types import SimpleNamespace

import pytest

from raycluster.cluster_config import ClusterConfig
from raycluster.errors import UsageError
from raycluster.lerobot.lines.accelerator_built import AcceleratorBuilt
from raycluster.lerobot.lines.accelerator_given import AcceleratorGiven
from raycluster.training.worker.shipping import host_part

BUILT, GIVEN = AcceleratorBuilt(), AcceleratorGiven()
FLAGS = ["--policy.type=act", "--steps=10"]


def test_cluster_mixed_precision_becomes_lerobot_mains_own_flag_or_is_refused_beside_it():
    assert BUILT.plan_args(FLAGS, ClusterConfig().line()) == FLAGS  # auto: LeRobot's own default
    assert BUILT.plan_args(FLAGS, ClusterConfig(mixed_precision="no").line()) == FLAGS  # LeRobot's default already
    bf16 = BUILT.plan_args(FLAGS, ClusterConfig(mixed_precision="bf16").line())
    assert bf16 == [*FLAGS, "--accelerator.mixed_precision=bf16"]
    theirs = [*FLAGS, "--accelerator.mixed_precision=fp16"]
    assert BUILT.plan_args(theirs, ClusterConfig().line()) == theirs  # verbatim
    with pytest.raises(UsageError, match=r"--cluster.mixed_precision=bf16 and --accelerator.mixed_precision=fp16"):
        BUILT.plan_args(theirs, ClusterConfig(mixed_precision="bf16").line())


def test_parallelism_degrees_that_do_not_multiply_to_the_workers_are_refused_before_any_worker():
    ok = [*FLAGS, "--parallelism.dp_replicate=2", "--parallelism.dp_shard=4"]
    assert BUILT.plan_args(ok, ClusterConfig(num_workers=8).line()) == ok
    with pytest.raises(UsageError, match=r"= 8 ranks, but --cluster.num_workers=4"):
        BUILT.plan_args(ok, ClusterConfig(num_workers=4).line())
    with pytest.raises(UsageError, match=r"--parallelism.dp_shard=two: a whole number"):
        BUILT.plan_args([*FLAGS, "--parallelism.dp_shard=two"], ClusterConfig().line())
    sentinel = [*FLAGS, "--parallelism.dp_replicate=2", "--parallelism.dp_shard=-1"]  # LeRobot resolves -1
    assert BUILT.plan_args(sentinel, ClusterConfig(num_workers=8).line()) == sentinel


def test_sharding_fills_the_degrees_from_where_the_ranks_landed():
    two_hosts = ["10.0.0.1"] * 8 + ["10.0.0.2"] * 8
    fsdp = BUILT.worker_args(FLAGS, two_hosts, "fsdp")
    assert fsdp == [*FLAGS, "--parallelism.dp_replicate=1", "--parallelism.dp_shard=16"]
    hsdp = BUILT.worker_args(FLAGS, two_hosts, "hsdp")  # shard over a host's 8 GPUs, replicate over 2 hosts
    assert hsdp == [*FLAGS, "--parallelism.dp_replicate=2", "--parallelism.dp_shard=8"]
    # The user's degree wins, and the other is what makes the product the world size, which LeRobot demands.
    mine = [*FLAGS, "--parallelism.dp_shard=4"]
    assert BUILT.worker_args(mine, two_hosts, "hsdp") == [*mine, "--parallelism.dp_replicate=4"]
    theirs = [*FLAGS, "--parallelism.dp_replicate=4"]
    assert BUILT.worker_args(theirs, two_hosts, "fsdp") == [*theirs, "--parallelism.dp_shard=4"]
    both = [*FLAGS, "--parallelism.dp_replicate=8", "--parallelism.dp_shard=2"]
    assert BUILT.worker_args(both, two_hosts, "hsdp") == both
    sentinel = [*FLAGS, "--parallelism.dp_shard=-1"]  # LeRobot fills -1 from the dp_replicate we give
    assert BUILT.worker_args(sentinel, two_hosts, "hsdp") == [*sentinel, "--parallelism.dp_replicate=2"]
    assert BUILT.worker_args(FLAGS, two_hosts, "none") == FLAGS


def test_a_degree_given_alone_that_does_not_divide_the_workers_is_refused_before_any_worker():
    hsdp = ClusterConfig(num_workers=16, sharding="hsdp").line()
    with pytest.raises(UsageError, match=r"--parallelism.dp_shard=3 does not divide the 16 workers"):
        BUILT.plan_args([*FLAGS, "--parallelism.dp_shard=3"], hsdp)
    with pytest.raises(UsageError, match=r"--parallelism.dp_replicate=5 does not divide the 16 workers"):
        BUILT.plan_args([*FLAGS, "--parallelism.dp_replicate=5"], ClusterConfig(num_workers=16, sharding="fsdp").line())
    with pytest.raises(UsageError, match=r"--parallelism.dp_shard=3 does not divide the 16 workers"):
        BUILT.worker_args([*FLAGS, "--parallelism.dp_shard=3"], ["a"] * 8 + ["b"] * 8, "hsdp")
    assert BUILT.plan_args([*FLAGS, "--parallelism.dp_shard=4"], hsdp) == [*FLAGS, "--parallelism.dp_shard=4"]
    # Without --cluster.sharding nothing is filled in: the degrees are LeRobot's own to check.
    assert BUILT.plan_args([*FLAGS, "--parallelism.dp_shard=3"], ClusterConfig(num_workers=16).line())


def test_hsdp_refuses_hosts_with_unequal_workers_and_ranks_that_are_not_one_block_per_host():
    with pytest.raises(UsageError, match=r"same number of workers on every host, got \{'a': 2, 'b': 1\}"):
        BUILT.worker_args(FLAGS, ["a", "a", "b"], "hsdp")
    with pytest.raises(UsageError, match=r"not one contiguous block per host"):
        BUILT.worker_args(FLAGS, ["a", "b", "a", "b"], "hsdp")


def test_lerobot_06_refuses_sharding_in_one_line():
    assert GIVEN.plan_args(FLAGS, ClusterConfig(mixed_precision="bf16").line()) == FLAGS  # 0.6.x: ours builds it
    with pytest.raises(UsageError, match=r"--cluster.sharding=fsdp needs LeRobot main"):
        GIVEN.plan_args(FLAGS, ClusterConfig(sharding="fsdp").line())
    with pytest.raises(UsageError, match=r"--cluster.sharding must be none, fsdp or hsdp"):
        ClusterConfig(sharding="zero3").check()


def test_a_dcp_only_checkpoint_format_is_refused_where_a_loadable_final_model_is_promised():
    # What LeRobot resolved (flags and --config_path file alike): its CheckpointFormat enum, or its text.
    dcp, both = (
        SimpleNamespace(checkpoint_format=SimpleNamespace(value="dcp")),
        SimpleNamespace(checkpoint_format="safetensors_dcp"),
    )
    BUILT.check_config(dcp, ClusterConfig().line())
    BUILT.check_config(both, ClusterConfig(model_dir="/opt/ml/model").line())  # the model dir gets every host's shards
    with pytest.raises(UsageError, match=r"--checkpoint_format=dcp with --cluster.model_dir=/opt/ml/model"):
        BUILT.check_config(dcp, ClusterConfig(model_dir="/opt/ml/model").line())


def test_the_lowest_rank_on_each_host_ships_that_hosts_part_rank_0s_host_first():
    hosts = ["b", "b", "a", "a", "c"]
    assert [host_part(hosts, rank) for rank in range(5)] == [(0, 3), None, (1, 3), None, (2, 3)]
    assert host_part(["a"] * 4, 0) == (0, 1) and host_part(["a"] * 4, 3) is None
