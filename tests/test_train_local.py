"""Real LeRobot training under Ray Train on a private local cluster (2 CPU workers)."""

import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import COMMON, REPO, dataset_flags, logged_losses, recorded_rows, run_cli
from guides import guide_command, run_guide_block
from raycluster.demo import TINY_DIFFUSION
from raycluster.training.phases import START_UP
from raycluster.training.summary import read_summary
from test_dashboard_browser import CHROMIUM

pytestmark = pytest.mark.slow


def train(dataset, *flags: str, workers: int = 2):
    result = run_cli("train", f"--cluster.num_workers={workers}", *dataset_flags(dataset), *COMMON, *flags)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result


def temp_leftovers() -> set[str]:
    """What a run could leave in /tmp: multiprocessing's pymp-*, a keeper's staging, Ray's processes' temp dir."""
    return {
        p.name
        for p in Path(tempfile.gettempdir()).iterdir()
        if p.name.startswith(("pymp-", "raycluster-staging-", "raycluster-tmp-"))
    }


TRAIN = ("docs/training.md", "## Train")
"""The guide's Train block (the README's copy of it): the module's one shared run (``act_run``). Every test here
that needs a trained ACT reads it, the README's own claims and the torchrun parity included, instead of
starting a private cluster of its own."""


@pytest.fixture(scope="module")
def act_run(tmp_path_factory):
    """The block as a reader runs it: relative paths, no activated virtualenv, in a directory of its own."""
    home = tmp_path_factory.mktemp("act")
    (home / ".venv").symlink_to(REPO / ".venv")
    before = temp_leftovers()
    result = run_guide_block(*TRAIN, home)
    out = home / "outputs" / "act"
    (home / "outputs" / "output.txt").write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stderr[-4000:]
    assert temp_leftovers() - before == set()
    return out


def lerobot_flags_of_the_block() -> list[str]:
    """The block's `raycluster train` flags that LeRobot's own parser reads (all but ours and the output dir)."""
    command = guide_command(*TRAIN, ".venv/bin/raycluster train").replace("\\\n", " ")
    return [f for f in shlex.split(command)[2:] if not f.startswith(("--cluster.", "--output_dir="))]


def test_the_readmes_train_block_lands_checkpoints_where_it_says(act_run):
    checkpoints = act_run / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name != "last") == ["000010", "000020"]
    assert (checkpoints / "last" / "pretrained_model" / "model.safetensors").is_file()
    assert Path(read_summary(act_run)["output_dir"]) == act_run.resolve()
    assert "loss:" in (act_run.parent / "output.txt").read_text()  # LeRobot's own loss lines, every --log_freq


def test_two_workers_train_act_to_the_asked_step_and_the_loss_falls(act_run):
    summary = read_summary(act_run)
    assert summary["world_size"] == 2 and summary["effective_batch_size"] == 8
    assert summary["backend"] == "gloo"
    assert summary["policy_wrapper"] == "DistributedDataParallel"
    assert summary["final_step"] == summary["steps"] == 20
    assert summary["checkpoints"] == [10, 20]
    assert summary["loss_last"] < summary["loss_first"]
    assert summary["samples_per_s"] > 0 and summary["restarts"] == 0 and summary["resumed_from"] is None
    for step in ("000010", "000020"):
        assert (act_run / "checkpoints" / step / "pretrained_model" / "model.safetensors").is_file()
        assert (act_run / "checkpoints" / step / "training_state" / "training_step.json").is_file()


def test_the_summary_and_the_curves_say_where_the_time_went(act_run):
    summary = read_summary(act_run)
    phases = summary["phases"]
    assert list(phases) == list(START_UP), phases
    assert list(phases.values()) == sorted(phases.values()) and phases["flags_checked"] > 0, phases
    assert phases["summary_written"] == summary["wall_s"] and summary["recoveries"] == []
    marked = {k: v for row in recorded_rows(act_run)[act_run.name] for k, v in row.items() if k.startswith("phase/")}
    assert {f"phase/{name}" for name in START_UP[:-2]} <= set(marked), marked
    assert marked["phase/first_step"] == phases["first_step"]


def test_resume_continues_from_the_checkpoint(act_run, tmp_path):
    # Resume into a copy so the first run's files stay as they were.
    out = tmp_path / "run"
    shutil.copytree(act_run, out, symlinks=True)
    config = out / "checkpoints" / "000010" / "pretrained_model" / "train_config.json"
    text = config.read_text().replace(str(act_run), str(out))
    config.write_text(text)
    shutil.rmtree(out / "checkpoints" / "000020")
    (out / "raycluster_summary.json").unlink()
    with socket.create_server(("127.0.0.1", 0)) as taken:  # the live curves' port is another's: the run goes on
        port = f"--cluster.curves_port={taken.getsockname()[1]}"
        result = run_cli(
            "train", "--cluster.num_workers=2", "--resume=true", f"--config_path={config}", "--steps=30", port
        )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "live curves not served on 127.0.0.1:" in result.stdout + result.stderr
    summary = read_summary(out)
    assert summary["resumed_from"] == 10
    assert summary["final_step"] == 30 and summary["checkpoints"] == [10, 20, 30]
    # The ledger, kept in the output dir (no checkpoint root), continued: the first run trained 1-20, this one
    # resumed from checkpoint 10 (20 was gone) and trained 11-30, so 11-20 were trained twice.
    ledger = summary["ledger"]
    first, second = ledger["starts"]
    assert [(s["first_step"], s["last_step"], s["steps_trained"]) for s in (first, second)] == [
        (0, 20, 20),
        (10, 30, 20),
    ]
    assert ledger["steps_redone"] == 10 and 0 < ledger["goodput"] < 30 / 40, ledger
    for start in (first, second):  # a local run's start is its command's: its parts add up to its wall time
        assert start["parts"]["before_command"] == 0 and abs(sum(start["parts"].values()) - start["wall_s"]) < 0.05
        assert start["parts"]["checkpoints"] > 0  # each saved once between two steps (10, 20), then at its end
    assert abs(second["wall_s"] - summary["wall_s"]) < 0.05
    assert "ledger: 2 start(s)" in result.stdout + result.stderr


def test_diffusion_trains_and_a_run_that_saves_no_checkpoint_still_ends_well_with_a_model_dir(dataset, tmp_path):
    # One run for both: a Diffusion policy under DDP, and, as on SageMaker, where the model dir is always set,
    # --save_checkpoint=false leaves nothing to publish there and the run still ends well.
    result = train(
        dataset,
        *TINY_DIFFUSION,
        "--steps=6",
        "--log_freq=3",
        "--save_checkpoint=false",
        f"--output_dir={tmp_path / 'out'}",
        f"--cluster.checkpoint_dir={tmp_path / 'checkpoints'}",
        f"--cluster.model_dir={tmp_path / 'model'}",
    )
    assert "nothing to publish to the model dir" in result.stdout + result.stderr
    summary = read_summary(tmp_path / "model")
    assert summary["final_step"] == 6 and summary["checkpoints"] == []
    assert summary["policy_wrapper"] == "DistributedDataParallel"


def test_same_losses_as_torchrun_lerobot_train(act_run, tmp_path):
    """Same seed and config: Ray Train + our Accelerator gives LeRobot's own DDP numbers, at every step of the
    shared run (the block's LeRobot flags, run where the block ran: its dataset root is relative)."""
    flags = lerobot_flags_of_the_block()
    bin_dir = Path(sys.executable).parent
    baseline = subprocess.run(
        [
            bin_dir / "torchrun",
            "--nproc-per-node=2",
            bin_dir / "lerobot-train",
            *flags,
            f"--output_dir={tmp_path}/torchrun",
        ],
        cwd=act_run.parent.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert baseline.returncode == 0, baseline.stderr[-3000:]
    expected = logged_losses(baseline.stdout + baseline.stderr)
    assert sorted(expected) == list(range(1, 21))
    assert logged_losses((act_run.parent / "output.txt").read_text()) == expected


def test_the_run_leaves_curves_with_the_logged_numbers_and_a_picture_whose_loss_falls(act_run):
    png = Path(read_summary(act_run)["curves"])
    assert png == act_run / "raycluster_curves.png"
    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert image.std() > 10  # not blank
    upper = image[: image.shape[0] // 2]  # the loss panel; its line is matplotlib's first colour
    ys, xs = np.nonzero(np.abs(upper - [31, 119, 180]).sum(axis=2) < 40)
    assert ys[xs > xs.max() - 10].mean() > ys[xs < xs.min() + 10].mean()  # its right end sits lower: it fell
    output = (act_run.parent / "output.txt").read_text()
    printed = logged_losses(output)
    recorded = {row["step"]: row["loss"] for row in recorded_rows(act_run)[act_run.name] if "loss" in row}
    assert sorted(recorded) == sorted(printed) == list(range(1, 21))
    assert all(f"{recorded[step]:.3f}" == f"{printed[step]:.3f}" for step in printed)


def test_the_curves_dashboard_shows_one_loss_point_per_logged_step(act_run):
    from playwright.sync_api import sync_playwright

    port = 7871
    server = subprocess.Popen(
        [sys.executable, "-m", "raycluster", "curves", str(act_run), f"--port={port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert "loss at 20 logged steps" in server.stdout.readline()
        seen: list[dict] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.on("response", lambda r: "/api/get_logs_batch" in r.url and seen.append(r.json()))
            wait_for_dashboard(page, f"http://127.0.0.1:{port}/?project=raycluster")
            page.get_by_text("loss", exact=True).first.wait_for(timeout=60_000)
            page.screenshot(path=str(act_run.parent / "curves-dashboard.png"))
            browser.close()
        logs = [run["logs"] for answer in seen for run in answer["data"] if run["run"] == act_run.name]
        assert logs and sorted(row["step"] for row in logs[-1] if "loss" in row) == list(range(1, 21))
    finally:
        server.terminate()
        server.wait(timeout=30)
    said = server.stdout.read()
    assert "write_token" not in said and "opened in browser" not in said, said  # trackio's banner stays unsaid


def test_curves_on_a_taken_port_say_so_in_one_line(act_run):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        result = run_cli("curves", str(act_run), f"--port={taken.getsockname()[1]}", timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].endswith("pick a free port: --port N"), result.stderr[-2000:]


def wait_for_dashboard(page, url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            page.goto(url, timeout=10_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
