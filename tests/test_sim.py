"""Whole SageMaker-shaped jobs on simulated hosts (network + PID namespaces): real Ray, real LeRobot."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from conftest import REPO, TINY_ACT_HPS, pick, recorded_rows, run_cli
from raycluster.checkpoints.manifest import MANIFEST
from raycluster.checkpoints.store import LocalStore
from raycluster.faults import PUBLISH_DELAY as TESTING_PUBLISH_DELAY
from raycluster.faults import RAY_START_FAILS as TESTING_RAY_START_FAILS
from raycluster.layout import OUTCOME_PORT
from simulated import (
    assert_all_complete,
    assert_clean,
    entry_pid,
    host_checkpoints,
    logged_steps,
    synced,
    synced_checkpoints,
    wait_for_log,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root (network namespaces)"),
]


def unauthenticated_http(workdir: Path) -> dict[int, str]:
    """Every TCP port algo-1 listens on (8265 included), as an HTTP GET from algo-2 without a token sees it:
    'refused', an HTTP status, or 'not http'."""
    listening = subprocess.run(
        ["ip", "netns", "exec", (workdir / "algo-1" / "netns").read_text(), "ss", "-Hltn"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    ports = sorted(
        {8265}
        | {
            int(field.rsplit(":", 1)[1])
            for field in listening
            if field.count(":") and field.rsplit(":", 1)[1].isdigit() and field.rsplit(":", 1)[1] != "*"
        }
    )
    probe = (
        "import sys, urllib.request, urllib.error\n"
        "for port in sys.argv[1:]:\n"
        "    try: print(port, urllib.request.urlopen(f'http://algo-1:{port}/', timeout=3).status)\n"
        "    except urllib.error.HTTPError as e: print(port, e.code)\n"
        "    except ConnectionRefusedError: print(port, 'refused')\n"
        "    except Exception as e: print(port, 'refused' if 'refused' in str(e) else 'not http')\n"
    )
    seen = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            (workdir / "algo-2" / "netns").read_text(),
            sys.executable,
            "-c",
            probe,
            *map(str, ports),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return {int(port): answer for port, answer in (line.split(maxsplit=1) for line in seen.splitlines())}


def code_channel(workdir: Path) -> Path:
    """The job's code as the head host got it (its Ray auth token included)."""
    return workdir / "algo-1" / "opt" / "ml" / "input" / "data" / "code"


def test_dotted_keys_die_in_sagemakers_driver_as_on_sagemaker(job, tmp_path):
    # What every `raycluster launch` job did before keys were encoded: the driver's `source` refuses the name.
    # Its own job (as every job here says why): it dies in SageMaker's driver before our code runs.
    result = job(tmp_path, 2, {"policy.type": "act", "steps": 1}).finish(timeout=120)
    assert all(h["exit_code"] == 1 for h in result.values()), result
    assert "not a valid identifier" in (tmp_path / "algo-1" / "log.txt").read_text()
    assert "Training Execution failed" in result["algo-1"]["failure"]
    assert_clean()


def test_failing_training_ends_every_host_with_the_drivers_code(job, tmp_path):
    # Its own job: LeRobot refuses the flag, which ends the job.
    sim = job(tmp_path, 2, {**TINY_ACT_HPS, "steps": 4, "policy__type": "no_such_policy"})
    result = sim.finish()
    assert result["algo-1"]["exit_code"] == 2  # raycluster train's own code for a rejected flag
    # The failure names the flag and what LeRobot said of it, not "see the error above".
    assert "LeRobot rejected the training flags" in result["algo-1"]["failure"]
    assert "invalid choice: 'no_such_policy'" in result["algo-1"]["failure"]
    assert result["algo-2"] == result["algo-1"]  # the head's code and reason: the job failed on every host
    # The job's log is streamed into the head's, each line once.
    assert (tmp_path / "algo-1" / "log.txt").read_text().count("[job] Running entrypoint for job") == 1


def test_a_lost_worker_host_fails_the_job_naming_it(job, tmp_path):
    # Its own job: a host is killed, which ends the job.
    sim = job(tmp_path, 2, {**TINY_ACT_HPS, "steps": 2000, "save_freq": 1000, "log_freq": 1})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "step:1 ")
    os.kill(int((tmp_path / "algo-2" / "host.pid").read_text()), signal.SIGKILL)
    killed = time.monotonic()
    result = sim.finish(timeout=180)
    assert result["algo-1"]["exit_code"] != 0
    assert "algo-2" in result["algo-1"]["failure"] and "left the Ray cluster" in result["algo-1"]["failure"]
    assert time.monotonic() - killed < 90
    assert_clean()


def wandb_runs(workdir: Path) -> dict[str, list[int]]:
    """Each offline W&B run the job's hosts wrote (by the host that wrote it, and its run id): the steps of its
    logged training rows, in the order written, read from its .wandb file by wandb's own reader."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal.datastore import DataStore

    runs = {}
    for path in sorted(workdir.glob("algo-*/scratch/**/offline-run-*/run-*.wandb")):
        store, steps = DataStore(), []
        store.open_for_scan(str(path))
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") == "history":
                if any("train/loss" in (item.key, "/".join(item.nested_key)) for item in record.history.item):
                    steps.append(record.history.step.num)
        runs[f"{path.relative_to(workdir).parts[0]} {path.stem.removeprefix('run-')}"] = steps
    return runs


def test_sigterm_twice_on_every_host_saves_the_step_reached_once_and_the_restarted_job_resumes_from_it(
    job, tmp_path, s3_endpoint, monkeypatch, rng
):
    # A --save_freq far beyond where the run gets: only the save on SIGTERM can keep its steps. The user's own
    # tracker is on (W&B offline, LeRobot's flags): rank 0 logs each logged step once, into one run across the
    # restart, and the stop still makes SageMaker's deadline. SageMaker asks twice (a second stop request a
    # second later): the step reached is still saved once.
    monkeypatch.setenv("WANDB_MODE", "offline")  # the sim passes it to every host
    first = tmp_path / "first"
    hps = {**TINY_ACT_HPS, "steps": 2000, "save_freq": 1000, "log_freq": 1, "cluster__curves_every_s": 2}
    hps |= {"wandb__enable": True, "wandb__project": "raycluster-sim", "wandb__mode": "offline"}
    # Its own job: the stop ends it; the restart is a second job, as SageMaker's is.
    sim = job(first, 2, hps)
    wait_for_log(first / "algo-1" / "log.txt", "step:3 ")
    assert_curves_of_the_running_job_can_be_looked_at(first, tmp_path / "synced")
    time.sleep(pick(rng, 0, 3, "seconds before SIGTERM"))  # a moment the test does not choose
    # Steps the head's streamed log had shown before the signal were done before it (the log may lag behind).
    reached = max(logged_steps(first / "algo-1" / "log.txt"))
    entry_points = [entry_pid(int((first / h / "host.pid").read_text())) for h in ("algo-1", "algo-2")]
    sim.send_signal(signal.SIGTERM)  # the sim forwards SIGTERM to every host's entry point, as SageMaker does
    stopped = time.monotonic()
    time.sleep(1)
    for pid in entry_points:  # SageMaker's second stop request: the sim itself forwards only the first
        os.kill(pid, signal.SIGTERM)
    result = sim.finish(timeout=180)
    seconds = time.monotonic() - stopped
    # The fault table of docs/interruptions.md is made from this line (`pytest tests/test_sim.py -s`).
    print(f"\nFAULT | twice in a row, mid-training | {seconds:.1f} s | {result}")
    assert seconds < 90  # SageMaker's SIGKILL comes at 120 s
    names = LocalStore(synced_checkpoints(first)).names()
    assert len(names) == 1 and os.listdir(synced_checkpoints(first)) == names, names
    step = int(names[0])
    # The step reached is saved: nothing done before the signal, nor any step trained at all, lies beyond it.
    assert reached <= step and max(logged_steps(first / "algo-1" / "log.txt")) <= step, (reached, step)
    assert_all_complete(synced_checkpoints(first))
    said = f"stopped by SIGTERM at step {step}; checkpoint {step} saved"
    assert all(h["exit_code"] == 143 and h["failure"] == said for h in result.values()), result
    assert not (first / "algo-1" / "opt" / "ml" / "model" / "pretrained_model").exists()  # no final model
    assert_clean()

    # SageMaker restarts the job (spot) with /opt/ml/checkpoints restored from S3.
    second = tmp_path / "second"
    restarted = job(second, 2, {**hps, "steps": step + 2}, f"--checkpoints={synced(first)}")
    result = restarted.finish()
    assert all(h["exit_code"] == 0 for h in result.values()), result
    summary = json.loads((second / "algo-1" / "opt" / "ml" / "model" / "raycluster_summary.json").read_text())
    assert summary["resumed_from"] == step and summary["final_step"] == step + 2
    # The ledger, restored with the checkpoints, continued: the stop saved the step reached, so nothing was
    # trained twice; each start counts from its container's start (SageMaker's driver, the entry point and the
    # cluster before the command) and its parts add up to its wall time.
    ledger = summary["ledger"]
    first_start, second_start = ledger["starts"]
    assert (first_start["last_step"], second_start["first_step"], second_start["last_step"]) == (step, step, step + 2)
    assert ledger["steps_redone"] == 0 and 0 < ledger["goodput"] < 1, ledger
    for start in (first_start, second_start):
        assert start["parts"]["before_command"] > 5 and abs(sum(start["parts"].values()) - start["wall_s"]) < 0.05
        assert 0 < start["parts"]["environment"] < start["parts"]["before_command"], start  # the head's, apart
    assert "ledger: 2 start(s)" in (second / "algo-1" / "log.txt").read_text()
    (before,), (after,) = wandb_runs(first).items(), wandb_runs(second).items()
    assert before[0].split()[1] == after[0].split()[1], (before, after)  # one run, resumed
    assert before[1] == list(range(1, step + 1)) and after[1] == [step + 1, step + 2], (before, after, step)


def assert_curves_of_the_running_job_can_be_looked_at(workdir: Path, synced: Path) -> None:
    """`raycluster curves --job` while the job runs: what SageMaker has synced of /opt/ml/checkpoints to the
    job's checkpoint S3 URI (here: the test copies it to ``synced``, then to the moto server, as SageMaker's
    sync would)."""
    checkpoints = workdir / "algo-1" / "opt" / "ml" / "checkpoints"
    wait_for(lambda: (checkpoints / "lerobot" / "curves" / "raycluster.db").exists(), 60)

    def copied_with_steps() -> bool:
        # One moment's copy: the store is republished every 2 s, and what S3 shows is that copy, not the log;
        # the first publication may hold step 1 alone, and a copy is only worth looking at with more.
        shutil.rmtree(synced, ignore_errors=True)
        shutil.copytree(checkpoints, synced)
        return len([row for row in recorded_rows(synced / "lerobot")["train"] if "loss" in row]) > 1

    wait_for(copied_with_steps, 60)
    s3, job = boto3.client("s3"), "sim-curves"
    for path in synced.rglob("*"):
        if path.is_file():
            s3.upload_file(str(path), "ckpts", f"{job}/{path.relative_to(synced)}")
    boto3.client("sagemaker").create_training_job(
        TrainingJobName=job,
        AlgorithmSpecification={"TrainingImage": "raycluster-sim:local", "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        OutputDataConfig={"S3OutputPath": "s3://ckpts/out"},
        ResourceConfig={"InstanceType": "ml.c5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        CheckpointConfig={"S3Uri": f"s3://ckpts/{job}"},
    )
    published = [row["step"] for row in recorded_rows(synced / "lerobot")["train"] if "loss" in row]
    shown = run_cli("curves", "--job", job, "--no-serve", timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    first, last = map(
        int, re.search(r"run train: loss at \d+ logged steps, step (\d+) -> (\d+)", shown.stdout).groups()
    )
    # Steps 1.. up to what rank 0 had recorded when the store was published, every one of them.
    assert first == 1 and last == published[-1] > 1 and published == list(range(1, last + 1)), (shown.stdout, published)
    # Live, where `raycluster dashboard`'s second SSM forwarding lands: algo-1's loopback, port 8266.
    ask = "import json, urllib.request as u; print(u.urlopen(u.Request('http://127.0.0.1:8266/api/get_logs', "
    ask += "json.dumps({'project': 'raycluster', 'run': 'train'}).encode()), timeout=30).read().decode())"
    netns = (workdir / "algo-1" / "netns").read_text()
    answer = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", ask], capture_output=True, text=True)
    assert answer.returncode == 0, answer.stderr[-2000:]
    live = sorted(row["step"] for row in json.loads(answer.stdout)["data"] if "loss" in row)
    assert live == list(range(1, len(live) + 1)) and live[-1] >= last, (live, last)  # one point per logged step
    assert unauthenticated_http(workdir)[8266] == "refused"  # from algo-2: loopback only


def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_a_save_that_misses_the_deadline_leaves_the_previous_checkpoint_newest(job, tmp_path, monkeypatch):
    # Ray kills the driver 1 s after SIGTERM (entry.stop_timeout_s), and every publish is held 3 s: too soon for
    # the save of the step reached (unheld, a 130 MB save is now published within that second).
    monkeypatch.setenv(TESTING_PUBLISH_DELAY, "3")  # the sim passes it to every host
    # Its own job: every publish of every host is held (a fault), and the job is stopped.
    hps = {**TINY_ACT_HPS, "steps": 2000, "save_freq": 3, "log_freq": 1, "entry__stop_timeout_s": 1}
    sim = job(tmp_path, 2, hps)
    wait_for_log(tmp_path / "algo-1" / "log.txt", "published checkpoint 000003")
    sim.send_signal(signal.SIGTERM)
    result = sim.finish(timeout=180)
    assert all(h["exit_code"] == 143 and "SIGTERM" in h["failure"] for h in result.values()), result
    names = LocalStore(synced_checkpoints(tmp_path)).names()
    assert names and all(int(name) % 3 == 0 for name in names), names  # periodic saves only, each complete
    assert_all_complete(synced_checkpoints(tmp_path))
    assert_clean()


def test_rank0_off_the_head_publishes_on_its_own_host_and_each_hosts_ranks_are_one_block(job, tmp_path, monkeypatch):
    # The head trains nothing here, so rank 0 runs on another host. Two workers on each of the two training
    # hosts: Ray Train numbers them host by host, so a shard group of consecutive ranks (--cluster.sharding=hsdp)
    # never spans two hosts. And algo-3's first `ray start` exits before its node joins (as one that misses
    # Ray's fixed 30 s registration wait does): that host starts its node again, and the job goes on.
    monkeypatch.setenv(TESTING_RAY_START_FAILS, "algo-3")  # the sim passes it to every host
    first = tmp_path / "first"
    hps = {**TINY_ACT_HPS, "steps": 4, "save_freq": 2, "log_freq": 2, "entry__head_trains": False}
    # Its own job: a layout no other job has (3 hosts, 4 workers, the head training nothing).
    result = job(first, 3, {**hps, "cluster__num_workers": 4}).finish()
    assert all(h["exit_code"] == 0 for h in result.values()), result
    algo3 = (first / "algo-3" / "log.txt").read_text()
    restarted = re.findall(r"before it joined the cluster .*: starting it again, once", algo3)
    assert len(restarted) == 1 and "no such option" in restarted[0].lower(), restarted
    # What the checkpoint S3 URI holds: both checkpoints, complete. Rank 0's host wrote the files into its own
    # /opt/ml/checkpoints (no byte crossed to the head), the head only the commit records.
    assert LocalStore(synced_checkpoints(first)).names() == ["000002", "000004"]
    assert_all_complete(synced_checkpoints(first))
    for name in ("000002", "000004"):
        assert [p.name for p in (host_checkpoints(first) / name).iterdir()] == [MANIFEST]
    holders = [host for host in ("algo-2", "algo-3") if (host_checkpoints(first, host) / "000004").exists()]
    assert len(holders) == 1, holders
    model = first / "algo-1" / "opt" / "ml" / "model"
    assert json.loads((model / "raycluster_summary.json").read_text())["world_size"] == 4
    log = (first / "algo-1" / "log.txt").read_text()
    # Rank 0 logs every rank's own node address (all-gathered), grouped by host.
    blocks = re.search(r"ranks by host: (\S+): 0-1, (\S+): 2-3\n", log)
    assert blocks and blocks.group(1) != blocks.group(2), re.findall(r"ranks by host: .*", log)


SHARDED = f"--include={REPO / 'tests' / 'jobs' / 'sharded_checkpoints.py'}"


def records(root: Path) -> dict[str, dict]:
    """Every checkpoint's commit record, by name (one without a record is no checkpoint)."""
    store = LocalStore(root)
    return {name: store.manifest(name) for name in store.names() if store.manifest(name) is not None}


def test_sharded_checkpoints_of_eight_hosts_hold_through_a_killed_worker_and_sigterm_and_resume_on_two(job, tmp_path):
    """Real DCP shards (FSDP2 over gloo), one rank per host, through raycluster's own shipping: attempt 1's rank
    on the last host is SIGKILLed after writing its shards of step 2 and before shipping them, Ray Train
    restarts, attempt 2 saves step 2 again, kills the last host's part store after step 5 (Ray starts it again)
    and goes on until SIGTERM; then a 2-host job resumes from S3 (8 shards read into 2 ranks)."""
    eight = tmp_path / "eight"
    hps = {"entry__job": "jobs/sharded_checkpoints.py", "workers": 8, "steps": 1000, "kill_at": 2, "step_s": 0.5}
    hps["kill_store_at"] = 5
    # Its own job: the 8-host sharded test job (a worker killed, a part store killed, then SIGTERM); the 2-host
    # resume is a second.
    sim = job(eight, 8, hps, SHARDED)
    # SIGTERM once a checkpoint after the killed part store's restart is published (its restart takes seconds).
    after_restart = re.compile(r"died and was started again.*published checkpoint (?!00000[0-5])\d{6}", re.DOTALL)
    wait_for_log(eight / "algo-1" / "log.txt", after_restart, timeout=900, sim=sim)
    sim.send_signal(signal.SIGTERM)
    result = sim.finish(timeout=240)
    assert all(h["exit_code"] == 143 for h in result.values()), result
    log = (eight / "algo-1" / "log.txt").read_text()
    assert "checkpoint 000002 (attempt 1) not published: abandoned by a restart" in log, log[-5000:]
    assert "attempt 2 on 8 ranks resumed from step 1: every rank loaded the weights of step 1: True" in log
    view = synced_checkpoints(eight)
    kept = records(view)  # what S3 holds: every checkpoint with a commit record is whole
    assert all(LocalStore(view).problems(name) is None for name in kept), [LocalStore(view).problems(n) for n in kept]
    # Parts placed after the last commit record (SIGTERM came between), or placed by the other hosts of a checkpoint
    # whose part the killed part store took with it (failed when its place reached the store started again, and
    # removed from every host, unless SIGTERM came first): no checkpoint either way, never resumed from (below).
    unrecorded = set(LocalStore(view).names()) - kept.keys()
    assert all(int(name) > max(map(int, kept)) or 4 <= int(name) <= 8 for name in unrecorded), sorted(unrecorded)
    assert {"000001", "000002", "000003"} <= kept.keys(), sorted(kept)  # 4 may go with the killed part store
    for name, record in kept.items():  # never two attempts in one checkpoint: the record's and the files' own word
        attempts = {entry["attempt"] for entry in record.values()}
        written = {(view / name / r).read_text() for r in record if "attempt_rank" in r}
        assert len(attempts) == 1 and written == {str(*attempts)} and len(written) == 1, (name, attempts, written)
        assert sum(r.endswith(".distcp") for r in record) == 8
    assert {entry["attempt"] for entry in kept["000002"].values()} == {2}  # saved again, by attempt 2 alone
    # The part store that died is named, and the checkpoints after it still commit with every host's part.
    assert "killing my host's part store after step 5" in log and "died and was started again" in log, log[-5000:]
    # A stage cut off by its store's death, or sent while Ray started it again, goes to the store started again.
    assert not re.search(r"not published: part \d+ failed: The actor \w+ is unavailable", log), log[-5000:]
    assert max(map(int, kept)) > 5, sorted(kept)
    for host in (f"algo-{n}" for n in range(1, 9)):  # each host holds its own rank's shard of a checkpoint
        assert len(list((host_checkpoints(eight, host) / "000003").rglob("*.distcp"))) == 1, host
        assert not list((eight / host / "opt" / "ml" / "raycluster-staging").rglob("*.attempt1.*")), host
    newest = max(map(int, kept))
    assert_clean()

    # A new job given the same S3 URI, on 2 hosts: SageMaker restores the whole prefix onto every host.
    two = tmp_path / "two"
    hps = {**hps, "workers": 2, "resume_only": True}
    result = job(two, 2, hps, SHARDED, f"--checkpoints={synced(eight)}").finish(timeout=600)
    assert all(h["exit_code"] == 0 for h in result.values()), result
    said = f"on 2 ranks resumed from step {newest}: every rank loaded the weights of step {newest}: True"
    assert said in (two / "algo-1" / "log.txt").read_text()
    # ... and the keeper moved what had no record aside as it looked for the newest complete one.
    quarantined = {p.name[:6] for p in (host_checkpoints(two).parent / "quarantine").glob("*")}
    assert unrecorded <= quarantined, (unrecorded, quarantined)
    assert_clean()


def test_interactive_cluster_runs_a_users_job_script_and_ends_on_request(job, tmp_path):
    # Its own job: no training (entry.job=none keeps the cluster up for the user's own jobs), ended by a user's job.
    sim = job(tmp_path, 2, {"entry__job": "none", "entry__keep_alive_s": 300})
    wait_for_log(tmp_path / "algo-1" / "log.txt", "interactive: the cluster stays up")
    netns = (tmp_path / "algo-1" / "netns").read_text()

    def submit(script: str, token: bool = True, wait: bool = True) -> subprocess.CompletedProcess:
        """A user's `ray job submit`, arriving where SSM port forwarding does: algo-1's loopback."""
        client = (
            "import sys, time; from ray.job_submission import JobSubmissionClient as C; c = C('http://127.0.0.1:8265'); "
            f"j = c.submit_job(entrypoint='python {script}'); print(j); "
            + (
                "[time.sleep(1) for _ in range(120) if not c.get_job_status(j).is_terminal()]; "
                "print(c.get_job_logs(j)); sys.exit(0 if str(c.get_job_status(j).value) == 'SUCCEEDED' else 1)"
                if wait
                else ""
            )
        )
        env = {
            **os.environ,
            "RAY_AUTH_MODE": "token" if token else "disabled",
            "RAY_AUTH_TOKEN_PATH": str(code_channel(tmp_path) / ".raycluster" / "auth_token"),
        }
        return subprocess.run(
            ["ip", "netns", "exec", netns, sys.executable, "-c", client],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )

    info = submit(f"{REPO}/jobs/cluster_info.py")
    assert info.returncode == 0, info.stdout[-2000:] + info.stderr[-2000:]
    assert "2 node(s)" in info.stdout and info.stdout.count("task ran on") == 2
    assert submit("-c 'print(1)'", token=False).returncode != 0  # the same head refuses a stranger
    # Nothing else in the job's network reaches the Jobs API; what else listens, and answers a stranger:
    exposure = unauthenticated_http(tmp_path)
    assert exposure[8265] == "refused", exposure
    assert exposure[OUTCOME_PORT] == "401", exposure  # the head's word to its worker hosts needs the token too
    print("algo-1 ports as algo-2 sees them without a token:", exposure)
    ended = time.monotonic()
    # Not followed to its end: it ends the cluster, dashboard included, while a client would still be asking.
    end = submit(f"{REPO}/jobs/end_cluster.py", wait=False)
    assert end.returncode == 0, end.stdout[-2000:] + end.stderr[-2000:]
    result = sim.finish(timeout=120)
    assert result == {"algo-1": {"exit_code": 0, "failure": None}, "algo-2": {"exit_code": 0, "failure": None}}
    assert time.monotonic() - ended < 60
    assert_clean()
