"""`raycluster launch` against a real AWS API server on loopback (moto: S3 and SageMaker), and the
captured request run as a simulated job: what the launcher sends is what the entry point understands."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from conftest import REPO, TINY_ACT
from raycluster.layout import BASE_ENV
from raycluster.ledger import Ledger, StartEntry
from raycluster.sagemaker.hyperparameters import split_hyperparameters, to_hyperparameters
from raycluster.sagemaker.topology import read_topology
from simulated import assert_clean, files_holding, synced_checkpoints

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "raycluster-test"


@pytest.fixture(scope="module")
def aws(tmp_path_factory):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    config = tmp_path_factory.mktemp("sm") / "config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAGEMAKER_VALIDATE_ROLE": "false",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config),
    }
    client("s3", env).create_bucket(Bucket=BUCKET)
    yield env
    server.stop()


def client(service: str, env):
    """A boto3 client of the moto server, with its fake credentials."""
    return boto3.client(
        service,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def s3(env):
    return client("s3", env)


def sagemaker(env):
    return client("sagemaker", env)


def launch(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "raycluster", "launch", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


JOB = [
    "--instance-type=ml.g5.12xlarge",
    "--instance-count=2",
    f"--role={ROLE}",
    "--spot",
    "--max-run=3600",
    "--max-wait=7200",
    f"--checkpoint-s3=s3://{BUCKET}/ckpt",
    f"--output-s3=s3://{BUCKET}/out",
    f"--dataset-s3=s3://{BUCKET}/data",
    "--tag=team=robots",
    "--subnet=subnet-0123456789abcdef0",
    "--security-group=sg-0123456789abcdef0",
]
FLAGS = [
    "--policy.type=act",
    "--steps=7",
    "--policy.pretrained_backbone_weights=null",
    "--policy.push_to_hub=false",
    "--policy.down_dims=[32, 64]",
    "--job_name=a run with spaces",
    "--cluster.keep_checkpoints=2",
    "--entry.join_timeout_s=120",
]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instance-type=p5.48xlarge"], "--instance-type 'p5.48xlarge' is not a SageMaker instance type"),
        (["--max-wait=100"], "--spot needs --max-wait >= --max-run"),
        (["--checkpoint-s3="], "--spot needs --checkpoint-s3"),
        (["--role=SageMakerRole"], "--role 'SageMakerRole' is not an IAM role ARN"),
        (["--job_name=it's"], "SageMaker's driver would write a ' into the shell file"),
        (["--policy/type=act"], "a flag name may hold only letters"),
        (["--steps=1", "--steps=2"], "--steps is given twice"),
        (["--py-version=py311"], "--py-version py311: LeRobot needs Python 3.12"),
        (["--framework-version=2.5"], "--framework-version 2.5: LeRobot 0.6 runs on PyTorch DLCs"),
        # The settings the hosts would refuse, refused before anything is uploaded or paid for.
        (["--entry.head_wait_s=-1"], "entry__head_wait_s=-1.0 must be a finite number"),
        (["--entry.lost_after_s=inf"], "entry__lost_after_s=inf must be a finite number"),
        (["--entry.preflight=maybe"], "entry__preflight must be true or false, got 'maybe'"),
        (["--cluster.cpus_per_worker=nan"], "--cluster.cpus_per_worker must be a finite number > 0"),
        (["--cluster.checkpoint_dir=S3://bucket/x"], "only local paths and s3://bucket/prefix"),
        (["--cluster.checkpoint_dir=s3:/bucket/x"], "--cluster.checkpoint_dir=s3:/bucket/x: only local paths"),
        (["--cluster.checkpoint_dir=ckpt"], "--cluster.checkpoint_dir=ckpt: on SageMaker only /opt/ml/checkpoints"),
        (["--cluster.checkpoint_dir="], "--cluster.checkpoint_dir= is empty: on SageMaker the job would keep no"),
        (
            ["--cluster.model_dir=/opt/ml/output/m"],
            "--cluster.model_dir=/opt/ml/output/m: on SageMaker only /opt/ml/model",
        ),
        (["--cluster.model_dir=s3://bucket/m"], "--cluster.model_dir=s3://bucket/m: only a local directory"),
        (["--cluster.num_workers=two"], "--cluster.num_workers must be int"),
        (["--max-run=9999999"], "--max-run must be 1..2419200 seconds"),
        (["--keep-alive=3601"], "--keep-alive must be 0..3600 seconds (SageMaker's limit for a warm pool), got 3601"),
        (["--region=mars"], "--region 'mars' is not an AWS region"),
        (["--job-name=my_job"], "--job-name 'my_job': letters, digits and '-' only"),
        (["--job-name=my-job\n"], "--job-name 'my-job\\n': letters, digits and '-' only"),  # `$` let it by
        (["--subnet=net-1", "--security-group=sg-0123456789abcdef0"], "--subnet 'net-1' is not a subnet-"),
        (["--tag=aws:team=x"], "keys up to 128 characters and not starting with 'aws:'"),
        # A secret the obvious way would be shown by DescribeTrainingJob; a name the hosts set is not the job's.
        (["--env=HF_TOKEN=hf_x"], "it looks like a credential, and DescribeTrainingJob shows every --env value"),
        (["--env=SM_HOSTS=[]"], "SM_HOSTS is not yours to set"),
        (["--secret=AWS_SECRET_ACCESS_KEY=k"], "AWS_SECRET_ACCESS_KEY is not yours to set"),
        (["--hub-cache-s3=s3://raycluster-test/hub", "--env=HF_HUB_OFFLINE=0"], "(--hub-cache-s3 sets it)"),
        (["--hub-cache-s3=hub"], "--hub-cache-s3 'hub' is not an s3://bucket/prefix URI"),
        (["--instance-group=eval=ml.c7i.8xlarge:1"], "give either --instance-type (with --instance-count) or"),
        (["--cluster.eval_resources=CPU"], "--cluster.eval_resources='CPU' is not JSON"),
        (['--cluster.eval_resources={"a_group_b": 1}'], "is a placement group's resource name"),
        (["--cluster.keep_best=accuracy"], "--cluster.keep_best=accuracy: not a metric; one of eval_loss (lower"),
        (["--cluster.keep_best=eval_loss"], "--cluster.keep_best=eval_loss needs --cluster.async_eval=true"),
    ],
)
def test_bad_launches_are_refused_before_anything_is_sent(aws, args, message):
    result = launch(aws, *JOB, *args, *FLAGS)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("raycluster launch: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]
    assert sagemaker(aws).list_training_jobs()["TrainingJobSummaries"] == []


def test_dry_run_needs_no_network_and_no_credentials(aws, tmp_path):
    # No network at all for this process (its own empty network namespace), no credentials, no endpoint.
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "SAGEMAKER_USER_CONFIG_OVERRIDE": aws["SAGEMAKER_USER_CONFIG_OVERRIDE"],
    }
    result = subprocess.run(
        [
            "unshare",
            "--net",
            sys.executable,
            "-m",
            "raycluster",
            "launch",
            *JOB,
            "--region=us-east-1",
            "--dry-run",
            *FLAGS,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    request = json.loads(result.stdout)
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.8-gpu-py312")
    assert request["AlgorithmSpecification"]["ContainerArguments"][-1].endswith("sm_drivers/sm_train.sh")
    assert request["ResourceConfig"]["InstanceCount"] == 2
    assert request["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    assert request["EnableManagedSpotTraining"] is True
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert request["CheckpointConfig"] == {"S3Uri": f"s3://{BUCKET}/ckpt", "LocalPath": "/opt/ml/checkpoints"}
    assert request["RemoteDebugConfig"] == {"EnableRemoteDebug": True}
    assert request["VpcConfig"] == {
        "Subnets": ["subnet-0123456789abcdef0"],
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }
    assert {"Key": "team", "Value": "robots"} in request["Tags"]
    dataset = next(c for c in request["InputDataConfig"] if c["ChannelName"] == "dataset")
    assert (
        dataset["InputMode"] == "FastFile" and dataset["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/data"
    )
    # Every flag comes back out of the entry point as the same flag, in order.
    assert split_hyperparameters(request["HyperParameters"])[1] == [f for f in FLAGS if not f.startswith("--entry.")]
    assert "entry/__main__.py" in result.stderr and "requirements.txt" in result.stderr
    # Nothing was created or uploaded, and the token is printed nowhere.
    assert sagemaker(aws).list_training_jobs()["TrainingJobSummaries"] == []
    assert "Contents" not in s3(aws).list_objects_v2(Bucket=BUCKET)
    assert "auth_token" not in result.stdout


AWKWARD = [
    "--job_name=spaces in a name",
    "--policy.down_dims=[32, 64]",
    '--dataset.image_transforms={"a": [1, 2], "b": "c"}',
    '--x.quotes=say "hi"',
    "--x.backslash=a\\b",
    "--x.dollar=$HOME and `id` and $(id)",
    "--x.unicode=café ∆",
    "--x.leading_zero=007",
    "--x.number=1e3",
    "--x.float=1.50",
    "--x.null=null",
    "--x.true=true",
    "--x.empty=",
    "--x.semicolon=a;b && c",
    "--x.hash=#not a comment",
    "--x.newline=two\nlines",
    "--x-dash=1",
    "--entry.keep_alive_s=0",
    "--cluster.num_workers=2",
]


def test_awkward_values_survive_sagemakers_own_driver(tmp_path):
    """What `launch` sends, through the SDK's environment.py and sm_train.sh's `source` under `set -e`,
    into the entry point's topology and back out as the very same flags."""
    import sagemaker.train.container_drivers as drivers

    hps = to_hyperparameters(AWKWARD)
    base = tmp_path / "opt" / "ml"
    (base / "input" / "config").mkdir(parents=True)
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hps))
    resources = {
        "current_host": "algo-1",
        "current_instance_type": "ml.c5.xlarge",
        "hosts": ["algo-1"],
        "network_interface_name": "eth0",
    }
    (base / "input" / "config" / "resourceconfig.json").write_text(json.dumps(resources))
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from scripts.environment import set_env; "
        "set_env(json.loads(sys.argv[2]), {}, json.loads(sys.argv[3]), output_file=sys.argv[4])"
    )
    env_file = tmp_path / "sm_training.env"
    subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            os.path.dirname(drivers.__file__),
            json.dumps(resources),
            json.dumps(hps),
            str(env_file),
        ],
        check=True,
        env={**os.environ, "TRAINING_JOB_NAME": "t"},
    )
    sourced = subprocess.run(
        [
            "bash",
            "-c",
            f"set -e; source {env_file}; {sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))'",
        ],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert sourced.returncode == 0, sourced.stderr
    env = {**json.loads(sourced.stdout), BASE_ENV: str(base)}
    assert set(json.loads(env["SM_HPS"])) == set(hps)
    settings, flags = split_hyperparameters(read_topology(env).hyperparameters)
    assert flags == [f for f in AWKWARD if not f.startswith("--entry.")] and settings.keep_alive_s == 0


def test_submitted_job_runs_our_entry_point_in_command_mode(aws):
    # A secret that exists passes the launch's DescribeSecret (a missing one: the test below).
    arn = client("secretsmanager", aws).create_secret(Name="launch/hf", SecretString="hf_x")["ARN"]
    result = launch(aws, *JOB, *FLAGS, f"--secret=HF_TOKEN={arn}")
    assert result.returncode == 0, result.stderr[-3000:]
    job = result.stdout.split("submitted ", 1)[1].split(";")[0]
    described = sagemaker(aws).describe_training_job(TrainingJobName=job)
    assert described["HyperParameters"]["steps"] == "7"
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in described["InputDataConfig"]}
    prefix = channels["code"].removeprefix(f"s3://{BUCKET}/")
    keys = [o["Key"] for o in s3(aws).list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]]
    assert any(k.endswith("entry/__main__.py") for k in keys) and any(k.endswith("jobs/train_lerobot.py") for k in keys)
    requirements = s3(aws).get_object(Bucket=BUCKET, Key=f"{prefix}/requirements.txt")["Body"].read().decode()
    # What pyproject.toml declares (Diffusion's extra too), never torch itself: the constraint keeps the DLC's.
    assert "ray[default,train]==2.60.0" in requirements and "lerobot[diffusion,training]==0.6.1" in requirements
    assert "pusht" not in requirements  # only a job that rolls out in PushT installs its simulation
    assert "\ntorch" not in requirements
    constraints = s3(aws).get_object(Bucket=BUCKET, Key=f"{prefix}/constraints.txt")["Body"].read().decode()
    assert constraints.split() == ["torch==2.8.*", "torchvision==0.23.*", "torchcodec>=0.6,<0.8"]
    drivers = channels["sm_drivers"].removeprefix(f"s3://{BUCKET}/")
    source_code = json.loads(s3(aws).get_object(Bucket=BUCKET, Key=f"{drivers}/sourcecode.json")["Body"].read())
    assert source_code["command"] == "exec python -u -m entry"

    def status() -> dict:
        shown = subprocess.run(
            [sys.executable, "-m", "raycluster", "status", job],
            cwd=REPO,
            env=aws,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr[-2000:]
        return json.loads(shown.stdout)

    before = status()  # no start has kept a ledger yet
    assert before["checkpoints"] == f"s3://{BUCKET}/ckpt" and before["ledger"] is None
    assert [phase["status"] for phase in before["sagemaker_phases"]] == ["Starting"]  # what moto's job went through
    # Two starts kept beside the checkpoints (the entry point's own file, as SageMaker syncs it): shown with goodput.
    parts = {"before_command": 60.0, "start_up": 20.0, "training": 100.0, "recovery": 0.0, "teardown": 20.0}
    first = StartEntry(0.0, 200.0, parts, first_step=0, last_step=50, steps_trained=50, steps_redone=0)
    second = StartEntry(300.0, 200.0, parts, first_step=40, last_step=90, steps_trained=50, steps_redone=0)
    kept = json.dumps(Ledger([first, second]).as_dict())
    s3(aws).put_object(Bucket=BUCKET, Key="ckpt/lerobot/raycluster_ledger.json", Body=kept)
    after = status()
    assert after["ledger"]["steps_redone"] == 10 and after["ledger"]["goodput"] == 0.45  # 200 s x 90/100, of 400 s
    assert "ledger: 2 start(s), 400.0s in all" in after["ledger_line"]
    # The dashboard: SSM port forwarding to algo-1, and the job's token kept on this machine only.
    dashboard = subprocess.run(
        [sys.executable, "-m", "raycluster", "dashboard", job, "--region=us-east-1", "--local-port=9000"],
        cwd=REPO,
        env=aws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        f"--target sagemaker-training-job:{job}_algo-1 --document-name AWS-StartPortForwardingSession"
        in dashboard.stdout
    )
    assert '"localPortNumber": ["9000"]' in dashboard.stdout
    assert '{"portNumber": ["8266"], "localPortNumber": ["8266"]}' in dashboard.stdout  # the live curves
    kept = Path(os.environ["HOME"]) / ".raycluster" / "jobs" / job / "auth_token"
    assert kept.stat().st_mode & 0o077 == 0 and kept.read_text() not in json.dumps(described, default=str)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"},
            "no AWS credentials",
        ),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "cannot reach AWS"),
        ({"bucket": "raycluster-no-such-bucket"}, "NoSuchBucket"),
        # Checked with the caller's credentials before anything is uploaded; the id is not repeated.
        ({"secret": "team/no-such-secret"}, "--secret HF_TOKEN=...: no such secret in"),
    ],
)
def test_a_launch_aws_refuses_ends_in_one_line_and_leaves_nothing(aws, change, message):
    env = {k: v for k, v in {**aws, **change}.items() if v is not None and k not in ("bucket", "secret")}
    bucket = change.get("bucket", BUCKET)
    job = [a.replace(f"s3://{BUCKET}/", f"s3://{bucket}/") for a in JOB]
    job += [f"--secret=HF_TOKEN={change['secret']}"] if "secret" in change else []
    jobs_before = len(sagemaker(aws).list_training_jobs()["TrainingJobSummaries"])
    objects_before = s3(aws).list_objects_v2(Bucket=BUCKET).get("KeyCount", 0)
    result = subprocess.run(
        [sys.executable, "-m", "raycluster", "launch", *job, *FLAGS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("raycluster launch: error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr[-3000:]
    assert "no-such-secret" not in result.stdout + result.stderr
    assert len(sagemaker(aws).list_training_jobs()["TrainingJobSummaries"]) == jobs_before
    assert s3(aws).list_objects_v2(Bucket=BUCKET).get("KeyCount", 0) == objects_before


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)")
def test_the_launched_request_runs_through_sagemakers_driver_on_simulated_hosts(
    aws, dataset, sims, tmp_path, monkeypatch
):
    """The dry run's request, dotted LeRobot flags, entry/cluster settings, awkward values and a secret included,
    runs through the SDK's own sm_train.sh on every simulated host to the end. It is a heterogeneous job (two
    instance groups): training on the ``train`` group, every checkpoint evaluated on the ``eval`` group's host,
    which the entry point offers to Ray as ``group:eval``, and its hosts install from the wheelhouse channel with no
    index (one job carries all three: a simulated job costs minutes)."""
    value = "hf_" + secrets.token_hex(20)
    client("secretsmanager", aws).create_secret(Name="sim/launched", SecretString=value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # the sim's stand-in for the job's role
        monkeypatch.setenv(name, aws[name])
    flags = [
        f"--dataset.repo_id={dataset.repo_id}",
        *(flag for flag in TINY_ACT if not flag.startswith("--policy.device")),  # the entry point picks the device
        "--steps=4",
        "--batch_size=4",
        "--num_workers=0",
        "--save_freq=2",
        "--log_freq=2",
        "--cluster.num_workers=2",
        "--dataset.eval_split=0.25",
        "--cluster.async_eval=true",
        '--cluster.eval_resources={"group:eval": 1}',
        "--cluster.checkpoint_dir=/opt/ml/checkpoints/lerobot",  # the entry point's own default, named: async_eval asks for it
        "--job_name=act on two hosts",
        "--dataset.episodes=[0, 1, 2, 3]",
        "--entry.join_timeout_s=120",
        "--entry.preflight=true",
        "--cluster.keep_checkpoints=2",
    ]
    result = launch(
        aws,
        "--instance-group=train=ml.c5.xlarge:2",
        "--instance-group=eval=ml.c5.xlarge:1",
        f"--role={ROLE}",
        f"--output-s3=s3://{BUCKET}/out",
        f"--dataset-s3=s3://{BUCKET}/data",
        "--secret=HF_TOKEN=sim/launched",
        "--wheelhouse",
        "--dry-run",
        *flags,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (tmp_path / "request.json").write_text(result.stdout)
    # The hosts' pip looks in the wheelhouse channel and at no index (the simulated image already holds every
    # package, so it installs nothing: what it would install, test_wheelhouse.py resolves).
    (tmp_path / "wheelhouse").mkdir()
    sim = sims(
        tmp_path / "sim",
        f"--request={tmp_path / 'request.json'}",
        f"--channel=dataset={dataset.root}",
        f"--channel=wheelhouse={tmp_path / 'wheelhouse'}",
        f"--aws-endpoint={aws['AWS_ENDPOINT_URL']}",
    )
    result = sim.finish()
    assert result == {f"algo-{n}": {"exit_code": 0, "failure": None} for n in (1, 2, 3)}, (result, sim.output()[-3000:])
    head = tmp_path / "sim" / "algo-1" / "opt" / "ml"
    log = (tmp_path / "sim" / "algo-1" / "log.txt").read_text()
    assert "Executing command: exec python -u -m entry" in log and "cluster formed" in log
    # SageMaker's driver installs nothing; each host's entry point makes the job's environment, looking in the
    # wheelhouse channel and at no index, and algo-1 alone keeps it in S3 for the next start.
    for host in ("algo-1", "algo-2", "algo-3"):
        said = (tmp_path / "sim" / host / "log.txt").read_text()
        assert "Installing requirements" not in said, said[:3000]
        assert "from --no-index --find-links /opt/ml/input/data/wheelhouse" in said, said[:3000]
        assert ("environment " in said and ": stored in s3://" in said) == (host == "algo-1"), said[:3000]
    kept = s3(aws).list_objects_v2(Bucket=BUCKET, Prefix="out/raycluster-environments/")["Contents"]
    assert [o["Key"].endswith(".tar") for o in kept] == [True], kept
    assert "all-reduce across 2 workers, backend gloo" in log  # the preflight probe ran across both hosts first
    table = log[log.index("all-reduce across 2 workers") :].split("transport:", 1)[0].splitlines()
    sizes = [row.removeprefix("[job]").split()[0] for row in table if row.removeprefix("[job]").strip()[:1].isdigit()]
    assert sizes == ["1024", "65536", "1048576", "16777216", "67108864"], table
    summary = json.loads((head / "model" / "raycluster_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["final_step"] == 4 and summary["backend"] == "gloo"
    assert (head / "model" / "pretrained_model" / "model.safetensors").is_file()
    assert_clean()
    config = json.loads((head / "model" / "pretrained_model" / "train_config.json").read_text())
    assert config["job_name"] == "act on two hosts" and config["dataset"]["episodes"] == [0, 1, 2, 3]
    # rank 0's host holds the checkpoint's one part, which may be either host: what S3 holds once synced
    assert (synced_checkpoints(tmp_path / "sim") / "000004" / "pretrained_model" / "model.safetensors").is_file()
    # Read on each host, and in nothing a training wrote either: curves, summary, checkpoints, logs, Ray's files.
    assert all(
        "read secret HF_TOKEN\n" in (tmp_path / "sim" / h / "log.txt").read_text()
        for h in ("algo-1", "algo-2", "algo-3")
    )
    assert files_holding(tmp_path / "sim", value.encode()) == []
    assert_evaluated_on_the_eval_groups_host_only(tmp_path / "sim", sim.output(), summary)


def assert_evaluated_on_the_eval_groups_host_only(workdir: Path, output: str, summary: dict) -> None:
    config = json.loads((workdir / "algo-3" / "opt" / "ml" / "input" / "config" / "resourceconfig.json").read_text())
    assert config["current_group_name"] == "eval"
    assert [g["hosts"] for g in config["instance_groups"]] == [["algo-1", "algo-2"], ["algo-3"]]
    subnet = re.search(r"sim: 3 hosts on (\S+)\.0/24", output).group(1)
    address = {f"algo-{k}": f"{subnet}.{10 + k}" for k in (1, 2, 3)}
    evaluations = summary["evaluations"]
    assert [e["step"] for e in evaluations] == [2, 4] and all(e["status"] == "VALIDATED" for e in evaluations)
    # Where Ray placed each task: the eval group's host, never a training host.
    assert {e["node"] for e in evaluations} == {address["algo-3"]}, evaluations
    assert all(e["metrics"]["eval_loss"] > 0 and e["metrics"]["eval_frames"] == 60 for e in evaluations)


def test_a_wheel_travels_with_the_code_and_anything_else_is_refused_before_any_upload(aws, tmp_path):
    wheel = tmp_path / "lerobot-0.6.2-py3-none-any.whl"
    wheel.write_bytes(b"PK")  # the dry run only stages it; every host installs it (test_lerobot_main)
    result = launch(aws, *JOB, "--dry-run", f"--wheel={wheel}", *FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wheels/{wheel.name}" in result.stderr.split("the code channel would hold:")[1]
    refused = launch(aws, *JOB, "--dry-run", f"--wheel={REPO / 'README.md'}", *FLAGS)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert f"--wheel {REPO / 'README.md'}: not a wheel file here" in refused.stderr


def test_a_wheelhouse_job_asks_for_the_wheelhouse_channel_and_its_hosts_pip_for_no_index(aws, tmp_path):
    """What ``--wheelhouse`` changes in the request and the code channel (its resolution: test_wheelhouse.py)."""
    result = launch(aws, *JOB, "--dry-run", "--wheelhouse", *FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    [channel] = [c for c in json.loads(result.stdout)["InputDataConfig"] if c["ChannelName"] == "wheelhouse"]
    assert channel["InputMode"] == "File" and channel["DataSource"]["S3DataSource"]["S3Uri"].startswith("s3://")
    staged = launch(aws, *JOB, f"--stage-only={tmp_path / 'staged'}", f"--wheelhouse={tmp_path / 'wheels'}", *FLAGS)
    assert staged.returncode == 0, staged.stderr[-3000:]
    lines = (tmp_path / "staged" / "requirements.txt").read_text().splitlines()
    assert lines[:3] == ["--no-index", "--find-links /opt/ml/input/data/wheelhouse", "-c constraints.txt"], lines
    plain = launch(aws, *JOB, f"--stage-only={tmp_path / 'plain'}", *FLAGS)
    assert (tmp_path / "plain" / "requirements.txt").read_text().splitlines()[0] == "-c constraints.txt", plain.stderr
    refused = launch(aws, *JOB, "--dry-run", f"--wheelhouse={REPO / 'README.md'}", *FLAGS)
    assert refused.returncode == 2 and "--wheelhouse " in refused.stderr and "not a directory" in refused.stderr


def test_the_environment_is_kept_beside_the_output_or_where_env_cache_s3_says(aws):
    """Where the hosts keep the job's environment (raycluster/environment: test_environment.py runs it)."""
    beside = launch(aws, *JOB, "--dry-run", *FLAGS)
    named = launch(aws, *JOB, "--dry-run", "--env-cache-s3=s3://team/envs", *FLAGS)
    nowhere = launch(aws, *[a for a in JOB if not a.startswith("--output-s3")], "--dry-run", *FLAGS)
    refused = launch(aws, *JOB, "--dry-run", "--env-cache-s3=team/envs", *FLAGS)
    assert beside.returncode == named.returncode == nowhere.returncode == 0, beside.stderr + named.stderr
    cache = "RAYCLUSTER_ENV_CACHE_S3"
    assert json.loads(beside.stdout)["Environment"][cache] == f"s3://{BUCKET}/out/raycluster-environments"
    assert json.loads(named.stdout)["Environment"][cache] == "s3://team/envs"
    assert cache not in (json.loads(nowhere.stdout).get("Environment") or {})
    assert refused.returncode == 2 and "--env-cache-s3 'team/envs' is not an s3://bucket/prefix URI" in refused.stderr


def test_instance_groups_make_a_heterogeneous_request_with_the_gpu_groups_image(aws):
    job = [arg for arg in JOB if not arg.startswith(("--instance-type", "--instance-count"))]
    groups = ["--instance-group=train=ml.g5.12xlarge:2", "--instance-group=eval=ml.c7i.8xlarge:1"]
    result = launch(aws, *job, *groups, "--dry-run", *FLAGS)
    assert result.returncode == 0, result.stderr[-2000:]
    request = json.loads(result.stdout)
    assert request["ResourceConfig"]["InstanceGroups"] == [
        {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2, "InstanceGroupName": "train"},
        {"InstanceType": "ml.c7i.8xlarge", "InstanceCount": 1, "InstanceGroupName": "eval"},
    ]
    assert "InstanceType" not in request["ResourceConfig"]
    assert "-gpu-" in request["AlgorithmSpecification"]["TrainingImage"]
    for bad, said in (("eval=c7i:1", "expected NAME=TYPE:COUNT"), ("e_group_x=ml.c7i.8xlarge:1", "NAME is letters")):
        refused = launch(aws, *job, f"--instance-group={bad}", "--dry-run", *FLAGS)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr[-2000:]


def test_keep_alive_asks_for_a_warm_pool_and_no_keep_alive_for_none(aws):
    kept = launch(aws, *JOB, "--dry-run", "--keep-alive=900", *FLAGS)
    plain = launch(aws, *JOB, "--dry-run", *FLAGS)
    assert kept.returncode == plain.returncode == 0, kept.stderr[-2000:] + plain.stderr[-2000:]
    assert json.loads(kept.stdout)["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 900
    assert "KeepAlivePeriodInSeconds" not in json.loads(plain.stdout)["ResourceConfig"]


def test_remote_debugging_is_on_unless_the_job_wants_no_shell_on_its_hosts(aws):
    on = launch(aws, *JOB, "--dry-run", *FLAGS)
    off = launch(aws, *JOB, "--dry-run", "--no-remote-debugging", *FLAGS)
    assert on.returncode == off.returncode == 0, on.stderr[-2000:] + off.stderr[-2000:]
    assert json.loads(on.stdout)["RemoteDebugConfig"] == {"EnableRemoteDebug": True}
    assert json.loads(off.stdout).get("RemoteDebugConfig", {}).get("EnableRemoteDebug") is not True


@pytest.mark.parametrize(
    "args, said",
    [
        (["raycluster-2026..."], "'raycluster-2026...' is not a training job's name"),
        (["raycluster-20261201-1", "--connect"], "no AWS region: pass --region"),
    ],
)
def test_dashboard_refuses_a_placeholder_name_or_a_connect_without_region_in_one_line(args, said, tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "raycluster", "dashboard", *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"raycluster dashboard: error: {said}"), result.stderr
