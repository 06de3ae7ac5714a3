"""`raycluster launch` against a real AWS API server on loopback (moto: S3 and SageMaker), and the
captured request run as a simulated job: what the launcher sends is what the entry point understands."""

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from conftest import REPO
from raycluster.sagemaker.hyperparameters import decode_like_sagemaker, split_hyperparameters

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "raycluster-test"


@pytest.fixture(scope="module")
def aws(tmp_path_factory):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    config = tmp_path_factory.mktemp("sm") / "config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "SAGEMAKER_VALIDATE_ROLE": "false",
           "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config)}
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
    client.create_bucket(Bucket=BUCKET)
    yield env
    server.stop()


def sagemaker(env):
    return boto3.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


def launch(env, *args):
    return subprocess.run([sys.executable, "-m", "raycluster", "launch", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


JOB = ["--instance-type=ml.g5.12xlarge", "--instance-count=2", f"--role={ROLE}", "--spot", "--max-run=3600",
       "--max-wait=7200", f"--checkpoint-s3=s3://{BUCKET}/ckpt", f"--output-s3=s3://{BUCKET}/out",
       f"--dataset-s3=s3://{BUCKET}/data", "--tag=team=robots", "--subnet=subnet-1", "--security-group=sg-1"]
FLAGS = ["--policy.type=act", "--steps=7", "--policy.pretrained_backbone_weights=null", "--policy.push_to_hub=false",
         "--policy.down_dims=[32,64]", "--cluster.keep_checkpoints=2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instance-type=p5.48xlarge"], "--instance-type 'p5.48xlarge' is not a SageMaker instance type"),
        (["--max-wait=100"], "--spot needs --max-wait >= --max-run"),
        ([f"--checkpoint-s3="], "--spot needs --checkpoint-s3"),
        (["--role=SageMakerRole"], "--role 'SageMakerRole' is not an IAM role ARN"),
        (["--job.name=it's"], "a ' breaks SageMaker's driver"),
    ],
)
def test_bad_launches_are_refused_before_anything_is_sent(aws, args, message):
    result = launch(aws, *JOB, *args, *FLAGS)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("raycluster launch: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert sagemaker(aws).list_training_jobs()["TrainingJobSummaries"] == []


def test_dry_run_prints_the_exact_request_and_submits_nothing(aws):
    result = launch(aws, *JOB, "--dry-run", *FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    request = json.loads(result.stdout)
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.8-gpu-py312")
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert request["CheckpointConfig"] == {"S3Uri": f"s3://{BUCKET}/ckpt", "LocalPath": "/opt/ml/checkpoints"}
    assert request["RemoteDebugConfig"] == {"EnableRemoteDebug": True}
    assert request["VpcConfig"] == {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]}
    assert {"Key": "team", "Value": "robots"} in request["Tags"]
    dataset = next(c for c in request["InputDataConfig"] if c["ChannelName"] == "dataset")
    assert dataset["InputMode"] == "FastFile" and dataset["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/data"
    # Every flag comes back out of the entry point as the same flag.
    assert split_hyperparameters(decode_like_sagemaker(request["HyperParameters"]))[1] == FLAGS
    assert sagemaker(aws).list_training_jobs()["TrainingJobSummaries"] == []


def test_submitted_job_runs_our_entry_point_in_command_mode(aws):
    result = launch(aws, *JOB, *FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    job = result.stdout.split("submitted ", 1)[1].split(";")[0]
    described = sagemaker(aws).describe_training_job(TrainingJobName=job)
    assert described["HyperParameters"]["steps"] == "7"
    s3 = boto3.client("s3", endpoint_url=aws["AWS_ENDPOINT_URL"], region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in described["InputDataConfig"]}
    prefix = channels["code"].removeprefix(f"s3://{BUCKET}/")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
    assert any(k.endswith("entry/__main__.py") for k in keys) and any(k.endswith("jobs/train_lerobot.py") for k in keys)
    requirements = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/requirements.txt")["Body"].read().decode()
    assert "ray[train,default]==2.60.0" in requirements and "\ntorch" not in requirements
    drivers = channels["sm_drivers"].removeprefix(f"s3://{BUCKET}/")
    source_code = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{drivers}/sourcecode.json")["Body"].read())
    assert source_code["command"] == "exec python -u -m entry"
    status = subprocess.run([sys.executable, "-m", "raycluster", "status", job], cwd=REPO, env=aws,
                            capture_output=True, text=True, timeout=120)
    assert json.loads(status.stdout)["checkpoints"] == f"s3://{BUCKET}/ckpt"
    # The dashboard: SSM port forwarding to algo-1, and the job's token kept on this machine only.
    dashboard = subprocess.run([sys.executable, "-m", "raycluster", "dashboard", job, "--region=us-east-1",
                                "--local-port=9000"], cwd=REPO, env=aws, capture_output=True, text=True, timeout=60)
    assert f"--target sagemaker-training-job:{job}_algo-1 --document-name AWS-StartPortForwardingSession" in dashboard.stdout
    assert '"localPortNumber": ["9000"]' in dashboard.stdout
    kept = Path(os.environ["HOME"]) / ".raycluster" / "jobs" / job / "auth_token"
    assert kept.stat().st_mode & 0o077 == 0 and kept.read_text() not in json.dumps(described, default=str)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)")
def test_the_launched_request_runs_as_a_simulated_job(aws, dataset, tmp_path):
    flags = [f"--dataset.repo_id={dataset.repo_id}", "--policy.type=act", "--policy.pretrained_backbone_weights=null",
             "--policy.push_to_hub=false", "--policy.dim_model=64", "--policy.n_heads=2", "--policy.dim_feedforward=128",
             "--policy.n_encoder_layers=1", "--policy.n_decoder_layers=1", "--policy.chunk_size=10",
             "--policy.n_action_steps=10", "--steps=3", "--batch_size=4", "--num_workers=0", "--save_freq=3"]
    result = launch(aws, "--instance-type=ml.c5.xlarge", "--instance-count=2", f"--role={ROLE}",
                    f"--output-s3=s3://{BUCKET}/out", f"--dataset-s3=s3://{BUCKET}/data", "--dry-run", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    (tmp_path / "request.json").write_text(result.stdout)
    sim = subprocess.run(
        [sys.executable, "-m", "raycluster", "sim", f"--request={tmp_path / 'request.json'}",
         f"--workdir={tmp_path / 'sim'}", f"--channel=dataset={dataset.root}"],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert sim.returncode == 0, sim.stdout[-4000:]
    summary = json.loads((tmp_path / "sim" / "algo-1" / "opt" / "ml" / "model" / "raycluster_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["final_step"] == 3
