"""The curves' store published whole while it is written, to a directory or to S3, fetched back; the PNG;
`raycluster curves` refusing what holds no curves."""

import os
import socket
import sqlite3
import subprocess
import threading

import boto3
import numpy as np
import pytest
import ray
from PIL import Image

from conftest import run_cli
from raycluster.curves.keeper import keeper_for_run
from raycluster.curves.plot import draw
from raycluster.curves.publish import CURVES, fetch, publish


def writer(db, stop: threading.Event) -> threading.Thread:
    """Rows appended in small transactions, as trackio does while a run logs."""

    def write() -> None:
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE IF NOT EXISTS metrics (step INTEGER, loss REAL, pad BLOB)")
        step = 0
        while not stop.is_set():
            step += 1
            conn.execute("INSERT INTO metrics VALUES (?, ?, ?)", (step, 1.0 / step, b"x" * 4096))
            conn.commit()
            stop.wait(0.002)
        conn.close()

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def rows(db) -> int:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return conn.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    finally:
        conn.close()


def test_a_published_store_is_whole_every_time_a_reader_looks(tmp_path):
    db, root, stop = tmp_path / "live" / "raycluster.db", tmp_path / "synced", threading.Event()
    db.parent.mkdir()
    sqlite3.connect(db).execute("CREATE TABLE metrics (step INTEGER, loss REAL, pad BLOB)").connection.close()
    thread = writer(db, stop)
    seen = []
    try:
        for i in range(10):
            publish(db, str(root), tmp_path / "staging")
            # What a sync or a reader finds: only the one whole file, never a partial one.
            assert [p.name for p in (root / CURVES).iterdir()] == ["raycluster.db"]
            fetched = fetch(str(root), tmp_path / f"reader{i}")
            seen.append(rows(fetched[0]))
    finally:
        stop.set()
        thread.join()
    assert seen == sorted(seen) and seen[-1] > seen[0]  # each look newer, each one whole
    assert not any((tmp_path / "staging").iterdir())


def test_a_store_published_to_s3_is_fetched_back_whole(tmp_path, s3_endpoint):
    db = tmp_path / "raycluster.db"
    sqlite3.connect(db).execute("CREATE TABLE metrics (step INTEGER, loss REAL, pad BLOB)").connection.close()
    stop = threading.Event()
    thread = writer(db, stop)
    try:
        while rows(db) == 0:  # a store with something in it
            stop.wait(0.05)
        where = publish(db, "s3://ckpts/job/lerobot", tmp_path / "staging")
    finally:
        stop.set()
        thread.join()
    assert where == "s3://ckpts/job/lerobot/curves/raycluster.db"
    # moto's buckets live as long as the test process: look under this test's prefix only.
    listed = boto3.client("s3").list_objects_v2(Bucket="ckpts", Prefix="job/")["Contents"]
    assert [o["Key"] for o in listed] == ["job/lerobot/curves/raycluster.db"]
    assert rows(fetch("s3://ckpts/job/lerobot", tmp_path / "fetched")[0]) > 0


def test_the_picture_is_drawn_and_its_loss_line_falls(tmp_path):
    steps = list(range(5, 105, 5))
    logged = [{"step": s, "loss": 80.0 / (1 + s / 20), "samples_per_s": 20.0 + (s % 3)} for s in steps]
    marks = [{"step": 50, "event/checkpoint": 50.0}, {"step": 100, "event/checkpoint": 100.0}]
    png = draw(tmp_path / "run" / "raycluster_curves.png", logged + marks + [{"step": 60, "event/restart": 60.0}])
    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert image.std() > 10  # not blank
    # The loss line (matplotlib's first colour, tab:blue) in the upper panel: its right end sits lower.
    upper = image[: image.shape[0] // 2]
    ys, xs = np.nonzero(np.abs(upper - [31, 119, 180]).sum(axis=2) < 40)
    left, right = ys[xs < xs.min() + 10].mean(), ys[xs > xs.max() - 10].mean()
    assert right > left + 20, (left, right)
    assert draw(tmp_path / "none.png", [{"step": 1, "samples_per_s": 2.0}]) is None  # nothing to draw without a loss


def test_curves_of_a_directory_without_any_are_refused_in_one_line(tmp_path):
    result = run_cli("curves", str(tmp_path), "--no-serve", timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"raycluster curves: error: no curves in {tmp_path}")


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount needs root")
def test_a_store_is_published_across_a_bind_mount(tmp_path):
    # One filesystem (same st_dev), two mounts: a rename between them fails with EXDEV all the same.
    root, mounted, live = tmp_path / "root", tmp_path / "mounted", tmp_path / "live"
    for path in (root, mounted, live):
        path.mkdir()
    subprocess.run(["mount", "--bind", str(root), str(mounted)], check=True)
    try:
        stop = threading.Event()
        stop.set()
        writer(live / "raycluster.db", stop).join()  # the table, with one row at most
        published = publish(live / "raycluster.db", str(mounted), tmp_path / "staging")
        assert published == str(mounted / CURVES / "raycluster.db")
        assert rows(published) == rows(live / "raycluster.db")
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.mark.cluster  # a local Ray with a job's environment
def test_the_curve_keeper_asks_no_one_about_a_hub_token(tmp_path):
    # An HF_TOKEN in the job's environment, and a "Hub" that accepts connections and never answers.
    hub = socket.create_server(("127.0.0.1", 0))
    env = {
        "HF_TOKEN": "hf_not_a_real_token",
        "HF_ENDPOINT": f"http://127.0.0.1:{hub.getsockname()[1]}",
        "HF_HUB_OFFLINE": "0",  # a job's environment, not this suite's
    }
    ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": env})
    try:
        keeper = keeper_for_run(tmp_path / "live", tmp_path / "run", "", every_s=30)
        ray.get(keeper.log.remote(1, {"loss": 1.0}), timeout=30)  # trackio's init is done, not waiting on a Hub
    finally:
        ray.shutdown()
        hub.close()
