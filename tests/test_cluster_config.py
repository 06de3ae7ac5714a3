import pytest

from raycluster.cluster_config import ClusterConfig, split_cluster_args
from raycluster.errors import UsageError
from raycluster.settings import to_flags


def test_cluster_flags_are_split_from_lerobot_flags_in_order():
    config, rest = split_cluster_args(
        ["--policy.type=act", "--cluster.num_workers=3", "--num_workers=0", "--cluster.use_gpu", "true", "--steps=5"]
    )
    assert config == ClusterConfig(num_workers=3, use_gpu=True)
    assert rest == ["--policy.type=act", "--num_workers=0", "--steps=5"]


def test_flags_round_trip():
    config = ClusterConfig(num_workers=4, use_gpu=True, address="auto", max_failures=2)
    assert split_cluster_args(to_flags(config, "cluster")) == (config, [])


@pytest.mark.parametrize(
    ("flag", "names"),
    [
        ("--cluster.nodes=2", "unknown setting --cluster.nodes"),
        ("--cluster.num_workers=two", "--cluster.num_workers must be int"),
        ("--cluster.num_workers=0", "--cluster.num_workers must be >= 1"),
        ("--cluster.use_gpu=maybe", "--cluster.use_gpu must be true or false"),
        ("--cluster.max_failures=-3", "--cluster.max_failures must be >= 0"),
        (
            "--cluster.checkpoint_dir=S3://bucket/x",
            "--cluster.checkpoint_dir=S3://bucket/x: only local paths and s3://",
        ),
        ("--cluster.model_dir=gs://bucket/x", "--cluster.model_dir=gs://bucket/x: only a local directory"),
        ("--cluster.checkpoint_dir=s3://bucket/x\n", "not an s3://bucket/prefix URI"),  # `$` let it by
        # draccus reads values as YAML: a YAML syntax error is the value's fault, named as such.
        ("--cluster.num_workers={", "--cluster.num_workers must be int, got '{'"),
        ("--cluster.max_failures=*a", "--cluster.max_failures must be int, got '\\*a'"),
        ("--cluster.cpus_per_worker=0", "--cluster.cpus_per_worker must be a finite number > 0"),
        ("--cluster.cpus_per_worker=inf", "--cluster.cpus_per_worker must be a finite number > 0"),
        ("--cluster.curves_port=70000", "--cluster.curves_port must be a TCP port"),
        ("--cluster.hang_timeout_s=5", r"--cluster.hang_timeout_s must be 0 \(off\) or a number of seconds from 10"),
        ("--cluster.hang_timeout_s=nan", r"--cluster.hang_timeout_s must be 0 \(off\) or a number of seconds from 10"),
        ("--cluster.hang_timeout_s=1e308", r"to 2419200 \(28 days, SageMaker's longest job\), got 1e\+308"),
        (
            "--cluster.started_at=4102444800",
            r"--cluster.started_at must be 0 \(the command's start\) or a moment already",
        ),
        ("--cluster.started_at=nan", "--cluster.started_at must be 0"),
        ("--cluster.started_at=-1", "--cluster.started_at must be 0"),
    ],
)
def test_bad_cluster_flags_name_the_field(flag, names):
    with pytest.raises(UsageError, match=names):
        split_cluster_args([flag])


def test_text_settings_are_taken_as_given():
    # Read as YAML, `no` would be False: the mixed precision "no" must stay the word it is.
    config, _ = split_cluster_args(["--cluster.mixed_precision=no", "--cluster.model_dir=null"])
    assert config.mixed_precision == "no" and config.model_dir == "null"
