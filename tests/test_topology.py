"""SageMaker's environment, read strictly: every malformed input names what is wrong."""

import json
import re
from pathlib import Path

import pytest

from raycluster.errors import UsageError
from raycluster.layout import BASE_ENV
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.hyperparameters import encode_value, split_hyperparameters, to_hyperparameters
from raycluster.sagemaker.network_env import collective_env, gpu_network_env
from raycluster.sagemaker.topology import host_order, read_topology


def fake_job(tmp_path: Path, hosts=("algo-1", "algo-2"), current="algo-1", groups=None, hps=None, **overrides) -> dict:
    """A host's environment and config files; ``hps`` as sent to CreateTrainingJob (strings)."""
    hps = hps or {}
    base = tmp_path / "opt" / "ml"
    (base / "input" / "config").mkdir(parents=True, exist_ok=True)
    (base / "input" / "config" / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": current,
                "hosts": list(hosts),
                "current_instance_type": "ml.p5.48xlarge",
                "network_interface_name": "eth0",
                "instance_groups": groups or [],
            }
        )
    )
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hps))
    env = {
        BASE_ENV: str(base),
        "SM_HOSTS": json.dumps(sorted(hosts)),
        "SM_CURRENT_HOST": current,
        "SM_NUM_GPUS": "0",
        "SM_NUM_CPUS": "4",
        "SM_HPS": json.dumps(hps),
        "SM_NETWORK_INTERFACE_NAME": "eth0",
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def test_hosts_are_ordered_numerically_and_the_head_is_algo_1(tmp_path):
    hosts = [f"algo-{k}" for k in range(1, 12)]
    topo = read_topology(fake_job(tmp_path, hosts=hosts, current="algo-10"))
    assert topo.hosts[:3] == ("algo-1", "algo-2", "algo-3") and topo.hosts[-1] == "algo-11"
    assert topo.head_host == "algo-1" and not topo.is_head
    assert sorted(hosts, key=host_order) == list(topo.hosts)


def test_a_named_head_instance_group_picks_the_head(tmp_path):
    groups = [
        {"instance_group_name": "cpu", "hosts": ["algo-1"]},
        {"instance_group_name": "gpu", "hosts": ["algo-3", "algo-2"]},
    ]
    for key in ("entry__head_group", "entry.head_group"):
        env = fake_job(tmp_path, hosts=("algo-1", "algo-2", "algo-3"), groups=groups, hps={key: "gpu"})
        assert read_topology(env).head_host == "algo-2"


def test_channels_become_paths_and_sagemakers_own_are_left_out(tmp_path):
    (tmp_path / "ds").mkdir()
    env = fake_job(tmp_path, SM_CHANNEL_DATASET=str(tmp_path / "ds"), SM_CHANNEL_CODE=str(tmp_path))
    assert read_topology(env).channels == {"dataset": tmp_path / "ds"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"SM_HOSTS": "algo-1,algo-2"}, "SM_HOSTS is not valid JSON"),
        ({"SM_HOSTS": "[]"}, "SM_HOSTS is empty"),
        ({"SM_HOSTS": '["algo-1","algo-1"]'}, "SM_HOSTS lists algo-1 more than once"),
        ({"SM_HOSTS": '{"a": 1}'}, "SM_HOSTS must be a JSON list"),
        ({"SM_CURRENT_HOST": "algo-9"}, "SM_CURRENT_HOST=algo-9 is not in SM_HOSTS"),
        ({"SM_CURRENT_HOST": None}, "SM_CURRENT_HOST is not set"),
        ({"SM_NUM_GPUS": "eight"}, "SM_NUM_GPUS='eight' is not an integer"),
        ({"SM_NUM_GPUS": "-1"}, "SM_NUM_GPUS=-1 must be >= 0"),
        ({"SM_NUM_CPUS": "0"}, "SM_NUM_CPUS=0 must be >= 1"),
        ({"SM_HPS": "[1]"}, "SM_HPS must be a JSON object"),
        ({"SM_CHANNEL_DATASET": "/no/such/dir"}, "SM_CHANNEL_DATASET=/no/such/dir does not exist"),
        ({"hps": {"entry__head_group": "gpu"}}, "entry.head_group='gpu' names no instance group"),
    ],
)
def test_malformed_environment_is_named(tmp_path, change, message):
    env = fake_job(tmp_path, hps=change.pop("hps", None))
    env.update({k: v for k, v in change.items() if v is not None})
    for key in [k for k, v in change.items() if v is None]:
        env.pop(key)
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")):
        read_topology(env)


def test_missing_or_broken_config_files_are_named(tmp_path):
    env = fake_job(tmp_path)
    config = Path(env[BASE_ENV]) / "input" / "config"
    (config / "hyperparameters.json").write_text("{not json")
    with pytest.raises(UsageError, match="hyperparameters.json is not valid JSON"):
        read_topology(env)
    (config / "resourceconfig.json").unlink()
    with pytest.raises(UsageError, match="resourceconfig.json is missing"):
        read_topology(env)


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        ({"hosts": 2}, "resourceconfig.json hosts must be a JSON list of host names, got 2"),
        ({"instance_groups": {"train": ["algo-1"]}}, "resourceconfig.json instance_groups must be a JSON list"),
        (
            {"instance_groups": [{"instance_group_name": ["train"], "hosts": ["algo-1"]}]},
            "resourceconfig.json instance group ['train']: expected a name and a JSON list of host names",
        ),
        (
            {"instance_groups": [{"instance_group_name": "train", "hosts": "algo-1"}]},
            "resourceconfig.json instance group 'train': expected a name and a JSON list of host names",
        ),
        (
            {"instance_groups": [{"instance_group_name": "train", "hosts": ["algo-1", "algo-9"]}]},
            "resourceconfig.json instance group 'train' lists ['algo-9'], which are not in SM_HOSTS",
        ),
    ],
)
def test_a_resourceconfig_of_the_wrong_shape_is_named_not_a_type_error(tmp_path, resources, said):
    env = fake_job(tmp_path)
    path = Path(env[BASE_ENV]) / "input" / "config" / "resourceconfig.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **resources}))
    with pytest.raises(UsageError) as refused:
        read_topology(env)
    assert str(refused.value).startswith(said), refused.value


def test_hyperparameters_become_flags_as_given():
    # As CreateTrainingJob carries them (strings), in either key form; values keep their exact text.
    settings, flags = split_hyperparameters(
        {
            "policy__type": "act",
            "steps": "7",
            "policy__pretrained_backbone_weights": "null",
            "policy.push_to_hub": "false",
            "dataset__episodes": "[0, 1]",
            "cluster__num_workers": "4",
            "entry__job": "jobs/mine.py",
            "entry.join_timeout_s": "30",
            "sagemaker_program": "x.py",
        }
    )
    assert settings == EntrySettings(job="jobs/mine.py", join_timeout_s=30.0)
    assert flags == [
        "--policy.type=act",
        "--steps=7",
        "--policy.pretrained_backbone_weights=null",
        "--policy.push_to_hub=false",
        "--dataset.episodes=[0, 1]",
        "--cluster.num_workers=4",
    ]
    # Older framework estimators JSON-encode every value; decoded values (SM_HPS) are re-encoded.
    assert split_hyperparameters({"policy__type": '"act"', "steps": 7, "x": None, "y": True})[1] == [
        "--policy.type=act",
        "--steps=7",
        "--x=null",
        "--y=true",
    ]
    with pytest.raises(UsageError, match="unknown hyperparameter entry__jobs"):
        split_hyperparameters({"entry__jobs": "x"})


@pytest.mark.parametrize(
    ("hps", "message"),
    [
        ({"entry__job": "null"}, "entry__job='null' must be a .py script inside the source directory"),
        ({"entry__job": "../x.py"}, "entry__job='../x.py' must be a .py script inside"),
        ({"entry__job": "/opt/ml/x.py"}, "entry__job='/opt/ml/x.py' must be a .py script inside"),
        ({"entry__join_timeout_s": "-1"}, "entry__join_timeout_s=-1.0 must be a finite number > 0"),
        ({"entry__lost_after_s": "0"}, "entry__lost_after_s=0.0 must be a finite number > 0"),
        ({"entry__jobs_api_lost_s": "0"}, "entry__jobs_api_lost_s=0.0 must be a finite number > 0"),
        ({"entry__head_wait_s": "inf"}, "entry__head_wait_s=inf must be a finite number > 0"),
        ({"entry__keep_alive_s": "nan"}, "entry__keep_alive_s=nan must be a finite number >= 0"),
        ({"entry__stop_timeout_s": "90"}, "entry__stop_timeout_s=90 must be at most 60"),
        ({"entry__join_timeout_s": "{"}, "entry__join_timeout_s must be a number, got '{'"),
        ({"entry__preflight": "maybe"}, "entry__preflight must be true or false, got 'maybe'"),
        ({"entry__head_trains": "null"}, "entry__head_trains must be true or false, got 'null'"),
        ({"entry__join_timeout_s": "soon"}, "entry__join_timeout_s must be a number, got 'soon'"),
    ],
)
def test_entry_settings_out_of_range_are_named(hps, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        split_hyperparameters(hps)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--job_name=it's", "SageMaker's driver would write a ' into the shell file"),
        # The driver JSON-decodes first: these become a ' in `export SM_HP_JOB_NAME='...'` (and in SM_HPS).
        ('--job_name="a\\u0027; touch /tmp/x; echo \\u0027"', "SageMaker's driver would write a '"),
        ('--policy.tags=["it\\u0027s"]', "SageMaker's driver would write a '"),
        ('--job_name="plain \\u0022quoted\\u0022"', None),
        ("--policy.type=act", None),
        ("--odd/name=1", "a flag name may hold only letters"),
        # `$` would match before the final newline: SM_HP_JOB_NAME\n breaks the driver's file under `set -e`.
        ("--job_name\n=x", "a flag name may hold only letters"),
        ("--a__b=1", "a flag name with '__' cannot travel"),
        ("steps=3", "pass flags as --name=value"),
        ("--x=" + "9" * 2501, "SageMaker limits a hyperparameter"),
    ],
)
def test_flags_the_driver_cannot_carry_are_refused(flag, message):
    if message is None:
        name, value = flag[2:].split("=", 1)
        assert to_hyperparameters([flag]) == {name.replace(".", "__"): value}
        return
    with pytest.raises(UsageError, match=message):
        to_hyperparameters([flag])
    with pytest.raises(UsageError, match="given twice"):
        to_hyperparameters(["--steps=1", "--steps=2"])
    assert encode_value(1.5) == "1.5"


def test_gpu_hosts_get_the_nccl_efa_environment_and_user_values_win():
    env = gpu_network_env(8, "eth0", "ml.p5.48xlarge", efa=True, current={})
    assert env == {
        "RDMAV_FORK_SAFE": "1",
        "NCCL_SOCKET_IFNAME": "eth0",
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
    }
    assert "FI_EFA_USE_DEVICE_RDMA" not in gpu_network_env(8, "eth0", "ml.g5.48xlarge", efa=True, current={})
    assert "FI_PROVIDER" not in gpu_network_env(8, "eth0", "ml.p5.48xlarge", efa=False, current={})
    assert gpu_network_env(8, "eth0", None, efa=False, current={"NCCL_SOCKET_IFNAME": "ens5"}) == {
        "RDMAV_FORK_SAFE": "1"
    }
    assert gpu_network_env(0, "eth0", "ml.p5.48xlarge", efa=True, current={}) == {}
    assert collective_env("eth0", {}) == {"GLOO_SOCKET_IFNAME": "eth0"}
    assert collective_env("eth0", {"GLOO_SOCKET_IFNAME": "lo"}) == {}
