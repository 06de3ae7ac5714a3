"""Looking at a run's curves: its own store (``RUN_DIR/curves``), or a SageMaker job's published one,
fetched from the job's checkpoint S3 URI; served by trackio's dashboard on this machine's loopback."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
from pathlib import Path

from raycluster.curves.publish import CURVES, PROJECT, fetch
from raycluster.errors import UsageError

log = logging.getLogger(__name__)

JOB_CHECKPOINT_DIR = "lerobot"
"""Where the entry point's training keeps its checkpoint root under /opt/ml/checkpoints (and so under the
job's checkpoint S3 URI)."""
REFRESH_S = 30.0


def run_store(run_dir: Path) -> Path:
    store = run_dir / CURVES
    if not (store / f"{PROJECT}.db").is_file():
        raise UsageError(
            f"no curves in {store}: give the output_dir of a run made with --cluster.track=trackio "
            "(the default) and trackio installed"
        )
    return store


def job_root(job_name: str, uri: str | None) -> str:
    """The job's training checkpoint root in S3, under its checkpoint S3 URI ``uri`` (SageMaker syncs
    /opt/ml/checkpoints there as it runs)."""
    if not uri:
        raise UsageError(
            f"job {job_name} has no checkpoint S3 URI: its curves are published under "
            "/opt/ml/checkpoints, which only a job launched with --checkpoint-s3 syncs to S3"
        )
    return f"{uri.rstrip('/')}/{JOB_CHECKPOINT_DIR}"


def job_store(root: str, into: Path) -> Path:
    if not fetch(root, into):
        raise UsageError(
            f"no curves under {root}/{CURVES} yet: a running job publishes them every --cluster.curves_every_s (30 s) once "
            "its first step is logged; try again shortly"
        )
    return into


def use_store(store: Path) -> None:
    """Point trackio at ``store``. trackio reads TRACKIO_DIR once, when first imported: one store per process."""
    if "trackio" in sys.modules and os.environ.get("TRACKIO_DIR") != str(store):
        raise RuntimeError(f"trackio already reads {os.environ.get('TRACKIO_DIR')} in this process, not {store}")
    os.environ["TRACKIO_DIR"] = str(store)


def series(store: Path) -> dict[str, list[dict]]:
    """Every run's logged rows in ``store``: ``{run: [{"step": N, "loss": ...}, ...]}``."""
    use_store(store)
    from trackio.sqlite_storage import SQLiteStorage

    return {run: SQLiteStorage.get_logs(PROJECT, run) for run in SQLiteStorage.get_runs(PROJECT)}


def describe_series(store: Path) -> list[str]:
    lines = []
    for run, rows in series(store).items():
        losses = [(row["step"], row["loss"]) for row in rows if "loss" in row]
        if losses:
            lines.append(
                f"run {run}: loss at {len(losses)} logged steps, step {losses[0][0]} -> {losses[-1][0]}, "
                f"loss {losses[0][1]:.4f} -> {losses[-1][1]:.4f} "
                "(at those two logged steps; the run's own summary averages steps at each end)"
            )
        else:
            lines.append(f"run {run}: no step logged yet")
    return lines


def serve(store: Path, port: int, refresh=None) -> None:
    """trackio's dashboard on 127.0.0.1:``port`` until Ctrl-C; ``refresh`` re-fetches the store meanwhile."""
    use_store(store)
    import trackio

    if refresh is not None:
        threading.Thread(target=_refresh_loop, args=(refresh,), name="curves-refresh", daemon=True).start()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # trackio's banner prints its write token
            server, *_ = trackio.show(
                project=PROJECT, host="127.0.0.1", server_port=port, open_browser=False, block_thread=False
            )
    except OSError as exc:
        raise UsageError(f"cannot serve the curves on 127.0.0.1:{port} ({exc}); pick a free port: --port N") from None
    print(
        f"curves of {store}: trackio dashboard at http://127.0.0.1:{port}/?project={PROJECT} (Ctrl-C ends it); "
        f"from another machine: ssh -L {port}:127.0.0.1:{port} <this host>",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def _refresh_loop(refresh) -> None:
    while True:
        threading.Event().wait(REFRESH_S)
        try:
            refresh()
        except Exception as exc:  # the dashboard keeps what it has
            log.warning("could not refresh the curves: %s", exc)
