"""The job's environment and secrets, checked at launch and read on a host: Secrets Manager is a moto server on
loopback reached through real boto3; the Hub cache is read by huggingface_hub's own scan."""

import json
import os
import subprocess
import sys

import boto3
import pytest

from conftest import run_cli, write_hub_cache
from raycluster.errors import UsageError
from raycluster.hub_cache import cache_files
from raycluster.launch.spec import LaunchSpec
from raycluster.sagemaker.job_env import SECRET_PREFIX, SECRETS_REGION, hub_cache_env, job_environment
from raycluster.sagemaker.secrets import read_secrets


@pytest.fixture(scope="module")
def secret_arn(s3_endpoint):
    """A secret in eu-west-1 of the moto server (its endpoint and fake credentials in the environment)."""
    client = boto3.client("secretsmanager", region_name="eu-west-1")
    return client.create_secret(Name="team/wandb", SecretString="wandb-value")["ARN"]


def test_the_request_carries_env_as_given_and_a_secret_by_its_id_only():
    given = {
        "NCCL_DEBUG": "INFO",
        "HF_TOKEN_PATH": "/opt/ml/input/data/code/token",  # where a credential is, not one
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",  # a switch
        "HF_ENDPOINT": "https://hub.example.com",  # a URL with no password in it
        "KEYBOARD_LAYOUT": "us",  # KEY only as a word of its own
    }
    secrets = {"HF_TOKEN": "team/hf", "HUB": "hf_token"}  # a name that begins as a token does, but is a name
    environment = job_environment(given, secrets, hub_cache=False, region="eu-west-1")
    ids = {SECRET_PREFIX + name: secret for name, secret in secrets.items()}
    assert environment == {**given, **ids, SECRETS_REGION: "eu-west-1"}
    assert job_environment({}, {}, hub_cache=False, region="") == {}


@pytest.mark.parametrize(
    ("env", "secrets", "said"),
    [
        ({"RAY_AUTH_MODE": "disabled"}, {}, "RAY_AUTH_MODE is not yours to set"),
        ({"OPENAI_KEY": "k"}, {}, "it looks like a credential"),
        ({"GH_PAT": "k"}, {}, "it looks like a credential"),
        ({"DB_PASS": "k"}, {}, "it looks like a credential"),
        ({"DATABASE_URL": "postgres://app:hunter2@db:5432/x"}, {}, "it looks like a credential"),
        ({"PYTHONPATH": "/x"}, {}, "PYTHONPATH is not yours to set"),
        ({"TRAINING_JOB_NAME": "x"}, {}, "TRAINING_JOB_NAME is not yours to set"),
        ({"WANDB_API_KEY": "k"}, {}, "pass --secret WANDB_API_KEY=<secret name or ARN>"),
        ({"DB_PASSWORD": "k"}, {}, "it looks like a credential"),
        ({"X": "v" * 513}, {}, "values are at most 512 characters"),
        ({"A-B": "1"}, {}, "a name is letters, digits and '_'"),
        ({}, {"HF_TOKEN": "arn:aws:s3:::bucket"}, "expected a Secrets Manager secret name or ARN"),
        ({"HF_TOKEN_PATH": "/x"}, {"HF_TOKEN_PATH": "team/hf"}, "give HF_TOKEN_PATH one way"),
        ({f"V{k}": "1" for k in range(99)}, {"S": "s"}, "at most 99 in all"),
        ({"LD_PRELOAD": "/x.so"}, {}, "LD_PRELOAD is not yours to set"),
        ({}, {"RAY_AUTH_TOKEN": "team/t"}, "RAY_AUTH_TOKEN is not yours to set"),  # it would beat the job's token
        ({}, {"RAY_TRAIN_X": "team/t"}, "Ray shows RAY_* variables on the dashboard"),
    ],
)
def test_an_env_or_secret_the_job_may_not_have_is_refused_naming_it(env, secrets, said):
    with pytest.raises(UsageError) as refused:
        job_environment(env, secrets, hub_cache=False, region="eu-west-1")
    assert said in str(refused.value)


TOKENS = {
    "a Hugging Face token": "hf_" + "aZ3k" * 9,
    "an OpenAI key": "sk-proj-" + "Q7x" * 14,
    "a GitHub token": "ghp_" + "mK2p" * 9,
    "a W&B key (hex)": "0f3a" * 10,
    "a random string": "Xq7Lm2Rv9Tz4Wb8Nc1Kd6Hs3Pf5Yg0Ju",
    "an AWS secret access key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE9+",
    "a JWT": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyb2JvdC0xIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "a random run in a path": "team/Xq7Lm2Rv9Tz4Wb8Nc1Kd6Hs3Pf5Yg0Ju",
}


@pytest.mark.parametrize("value", TOKENS.values(), ids=TOKENS.keys())
def test_a_secrets_value_given_where_its_name_belongs_is_refused_without_repeating_it(value):
    with pytest.raises(UsageError) as refused:
        job_environment({}, {"HF_TOKEN": value}, hub_cache=False, region="eu-west-1")
    said = str(refused.value)
    assert said.startswith("--secret HF_TOKEN=...: that looks like the secret's value") and value not in said
    # A request made by hand, past the launch's check: every host refuses it too, naming only the name.
    with pytest.raises(UsageError) as refused:
        read_secrets({SECRET_PREFIX + "HF_TOKEN": value, SECRETS_REGION: "eu-west-1"})
    assert str(refused.value) == said


@pytest.mark.parametrize("flag", ["--env", "--secret"])
def test_a_secrets_value_given_as_a_variables_name_is_refused_without_repeating_it(flag):
    value = "hf_" + TOKENS["a random string"]
    env, secrets = ({value: "1"}, {}) if flag == "--env" else ({}, {value: "team/hf"})
    with pytest.raises(UsageError) as refused:
        job_environment(env, secrets, hub_cache=False, region="eu-west-1")
    said = str(refused.value)
    assert said.startswith(f"{flag} ...: that name looks like a secret's value") and value not in said


def test_launch_with_a_value_typed_without_its_name_ends_in_one_line_without_it():
    value = TOKENS["a Hugging Face token"]
    shown = run_cli("launch", "--instance-type=ml.g5.xlarge", f"--secret={value}", "--policy.type=act", "--dry-run")
    assert shown.returncode == 2 and value not in shown.stdout + shown.stderr, shown.stderr[-2000:]
    assert shown.stderr.strip().splitlines()[-1].endswith("argument --secret: expected KEY=VALUE")


@pytest.mark.parametrize("name", ["PATH", "LD_PRELOAD", "RAY_ADDRESS", "AWS_ACCESS_KEY_ID"])
def test_a_host_refuses_a_secret_name_the_job_may_not_set_from_a_request_made_by_hand(name):
    with pytest.raises(UsageError) as refused:
        read_secrets({SECRET_PREFIX + name: "team/x", SECRETS_REGION: "eu-west-1"})
    assert f"{name} is not yours to set" in str(refused.value) and "team/x" not in str(refused.value)


def test_a_host_reads_each_secret_by_name_in_the_launch_region_or_by_arn_in_its_own(secret_arn):
    arn = secret_arn
    environ = {SECRET_PREFIX + "WANDB_API_KEY": "team/wandb", SECRET_PREFIX + "OTHER": arn, SECRETS_REGION: "eu-west-1"}
    assert read_secrets(environ) == {"WANDB_API_KEY": "wandb-value", "OTHER": "wandb-value"}
    # The same name in another region is another secret: it does not exist there.
    with pytest.raises(UsageError) as missing:
        read_secrets({**environ, SECRETS_REGION: "us-east-2"})
    assert str(missing.value) == "secret WANDB_API_KEY does not exist: create it, or fix --secret WANDB_API_KEY=..."
    assert read_secrets({"NCCL_DEBUG": "INFO"}) == {}


def test_a_host_without_credentials_stops_naming_the_secret_not_its_value(s3_endpoint, secret_arn, tmp_path):
    env, arn = s3_endpoint, secret_arn
    code = "import sys; from raycluster.sagemaker.secrets import read_secrets; "
    code += f"read_secrets({{'{SECRET_PREFIX}WANDB_API_KEY': '{arn}'}})"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    clean |= {"AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"], "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "secret WANDB_API_KEY: no AWS credentials on this host" in result.stderr
    assert "wandb-value" not in result.stderr + result.stdout and arn not in result.stderr + result.stdout


def test_a_hub_cache_is_staged_as_its_refs_and_snapshot_files_and_anything_else_refused(tmp_path):
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "config.json").write_text('{"type": "act"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    cache = tmp_path / "hub"
    write_hub_cache(cache, "local/tiny-act", folder)
    repos, files = cache_files(cache)
    keys = sorted(key for _, key in files)
    assert repos == ["model:local/tiny-act"]
    assert keys[0] == "models--local--tiny-act/refs/main" and len(keys) == 3
    assert all("/snapshots/" in key and key.endswith(("config.json", "model.safetensors")) for key in keys[1:])
    with pytest.raises(UsageError, match="no Hub cache there; make one with: hf download REPO --cache-dir"):
        cache_files(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="the cache holds no repo"):
        cache_files(tmp_path / "empty")
    assert hub_cache_env({}) == {}
    assert hub_cache_env({"hub": cache}) == {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}


def test_launch_with_a_tokens_value_as_a_secret_id_ends_in_one_line_without_it():
    value = TOKENS["a Hugging Face token"]
    shown = run_cli(
        "launch", "--instance-type=ml.g5.xlarge", "--role=arn:aws:iam::123456789012:role/R", "--region=eu-west-1",
        "--output-s3=s3://my-bucket/out", f"--secret=HF_TOKEN={value}", "--policy.type=act", "--dry-run",
    )  # fmt: skip
    assert shown.returncode == 2 and value not in shown.stdout + shown.stderr, shown.stderr[-2000:]
    last = shown.stderr.strip().splitlines()[-1]
    assert last.startswith("raycluster launch: error: --secret HF_TOKEN=...: that looks like the secret's value")


def test_the_dry_run_request_holds_env_secret_ids_and_the_hub_channel(tmp_path):
    shown = run_cli(
        "launch", "--instance-type=ml.g5.xlarge", "--role=arn:aws:iam::123456789012:role/R", "--region=eu-west-1",
        "--output-s3=s3://my-bucket/out", "--hub-cache-s3=s3://my-bucket/hub", "--env=NCCL_DEBUG=INFO",
        "--secret=HF_TOKEN=team/hf", "--secret=WANDB_API_KEY=arn:aws:secretsmanager:us-east-1:123456789012:secret:w-AbC",
        "--policy.path=lerobot/smolvla_base", "--policy.push_to_hub=false", "--dry-run",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    request = json.loads(shown.stdout)
    assert request["Environment"] == {
        "NCCL_DEBUG": "INFO",
        SECRET_PREFIX + "HF_TOKEN": "team/hf",
        SECRET_PREFIX + "WANDB_API_KEY": "arn:aws:secretsmanager:us-east-1:123456789012:secret:w-AbC",
        SECRETS_REGION: "eu-west-1",
        # Where the job's environment is kept: beside --output-s3, by default.
        "RAYCLUSTER_ENV_CACHE_S3": "s3://my-bucket/out/raycluster-environments",
    }
    (hub,) = [c for c in request["InputDataConfig"] if c["ChannelName"] == "hub"]
    assert hub["InputMode"] == "FastFile" and hub["DataSource"]["S3DataSource"]["S3Uri"] == "s3://my-bucket/hub"


def test_a_hub_cache_job_that_would_push_to_the_hub_at_its_end_is_refused_at_launch():
    spec = LaunchSpec(
        instance_type="ml.g5.xlarge",
        role="arn:aws:iam::123456789012:role/R",
        hub_cache_s3="s3://my-bucket/hub",
        flags=("--policy.path=lerobot/smolvla_base", "--policy.repo_id=me/tuned"),
    )
    with pytest.raises(UsageError, match="add --policy.push_to_hub=false"):
        spec.check()
