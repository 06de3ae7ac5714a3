"""The curve keeper: a Ray actor on the driver's node that receives every logged step's metrics (rank 0),
each worker's hardware sample and the run's events, writes them with trackio (a local SQLite store, no
network), publishes a snapshot of that store beside the checkpoints every ``every_s``, and at the end into
``<output_dir>/curves/`` with the PNG beside the summary.

The live store is kept in the run's staging directory, not in ``output_dir``: LeRobot refuses to start in an
output_dir that exists, and a restart with nothing to resume from moves output_dir aside."""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raycluster.cluster_config import ClusterConfig
from raycluster.curves.plot import PNG_NAME
from raycluster.curves.publish import CURVES, PROJECT, fetch, publish

log = logging.getLogger(__name__)

NO_HUB = {"HF_TOKEN": "", "HF_TOKEN_PATH": "/nonexistent/raycluster-no-hub-token", "HF_HUB_OFFLINE": "1"}
"""The curve keeper's process holds no Hub credentials and is offline: trackio asks the Hub who a token
belongs to when it finds one (no timeout), and the curves are local files, never sent anywhere."""
INSTALL_HINT = "curves need trackio: pip install 'raycluster[curves]' (make test and make demo install it)"


@ray.remote(num_cpus=0)
class CurveKeeper:
    def __init__(self, live_dir: str, run: str, output_dir: str, publish_root: str, every_s: float):
        import trackio  # TRACKIO_DIR is this actor's own environment (see keeper_for_run): read at import

        self.live_dir, self.output_dir, self.publish_root = Path(live_dir), output_dir, publish_root
        self.staging, self.every_s, self.run = self.live_dir.parent, every_s, run
        # A restarted job, or a resumed run, goes on with the curves it published.
        for earlier in (publish_root, output_dir):
            if earlier and not (self.live_dir / f"{PROJECT}.db").exists():
                fetch(earlier, self.live_dir)
        self.trackio = trackio
        # trackio's banner names its own default store and "uploading": ours is elsewhere and local (the driver says where).
        with contextlib.redirect_stdout(io.StringIO()):
            trackio.init(project=PROJECT, name=run, resume="allow", auto_log_cpu=False, auto_log_gpu=False)
        self.server = None
        self._done = threading.Event()
        if publish_root:
            threading.Thread(target=self._publish_loop, name="curves-publisher", daemon=True).start()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.trackio.log(metrics, step=step)

    def mark(self, step: int, event: str, metrics: dict[str, float] | None = None) -> None:
        """An event at ``step`` (checkpoint, restart, resume, interrupted): a point of ``event/<event>``."""
        self.log(step, {f"event/{event}": float(step), **(metrics or {})})

    def caught_up(self) -> None:
        """Returns once every call the caller made before is done: Ray runs one caller's calls in order."""

    def serve(self, port: int) -> str:
        """trackio's dashboard of the live store on this node's loopback until the run ends; what to say of it."""
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its banner prints the write token
                self.server, *_ = self.trackio.show(
                    project=PROJECT, host="127.0.0.1", server_port=port, open_browser=False, block_thread=False
                )
        except Exception as exc:  # a taken port (another run's, say): the curves are still recorded, not served
            return f"live curves not served on 127.0.0.1:{port}: {exc}"
        return f"live curves: http://127.0.0.1:{port}/?project={PROJECT} on the driver's node while the run goes"

    def finish(self) -> str | None:
        """Flush the store, publish it a last time (and into ``<output_dir>/curves/``), draw the PNG beside
        the run's summary from what the store holds (a restarted job's earlier steps too); returns the PNG's
        path (None: nothing logged)."""
        from trackio.sqlite_storage import SQLiteStorage

        from raycluster.curves.plot import draw

        self._done.set()
        if self.server is not None:
            self.server.close()
        with contextlib.redirect_stdout(io.StringIO()):
            self.trackio.finish()
        self._publish(self.publish_root)
        self._publish(self.output_dir)
        return draw(Path(self.output_dir) / PNG_NAME, SQLiteStorage.get_logs(PROJECT, self.run))

    def _publish_loop(self) -> None:
        while not self._done.wait(self.every_s):
            self._publish(self.publish_root)

    def _publish(self, root: str) -> None:
        db = self.live_dir / f"{PROJECT}.db"
        if not root or not db.exists():
            return
        try:
            publish(db, root, self.staging)
        except Exception as exc:  # the curves must never stop a training
            log.warning("could not publish the curves to %s/%s: %s", root, CURVES, exc)


def curves_for_run(cluster: ClusterConfig, output_dir: Path, staging: str):
    """The run's curve keeper (its live store in ``staging``, published under the checkpoint root, when there
    is one, and at the end in ``output_dir``; served on ``curves_port``), or None with ``--cluster.track=none``."""
    if cluster.track == "none":
        return None
    keeper = keeper_for_run(Path(staging) / "curves-live", output_dir, cluster.checkpoint_dir, cluster.curves_every_s)
    if keeper is not None and cluster.curves_port:
        try:
            log.info(ray.get(keeper.serve.remote(cluster.curves_port), timeout=120))
        except Exception as exc:  # the curves must never stop a training
            log.warning("the curves are not recorded: %s", exc)
            return None
    return keeper


def finish_curves(keeper) -> str | None:
    """The last publish and the PNG beside the run's summary; the PNG's path, or None."""
    if keeper is None:
        return None
    try:
        return ray.get(keeper.finish.remote(), timeout=120)
    except Exception as exc:  # the curves must never fail a training
        log.warning("the curves could not be finished: %s", exc)
        return None


def keeper_for_run(live_dir: Path, output_dir: Path, publish_root: str, every_s: float):
    """A curve keeper on the caller's node (the driver's), or None (said once) when trackio is missing."""
    try:
        import trackio  # noqa: F401 (only whether it is installed)
    except ImportError:
        log.warning(INSTALL_HINT)
        return None
    live_dir.mkdir(parents=True, exist_ok=True)
    node_id = ray.get_runtime_context().get_node_id()
    return CurveKeeper.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        # trackio reads TRACKIO_DIR once, at import: the actor gets a process of its own with it set.
        runtime_env={"env_vars": {"TRACKIO_DIR": str(live_dir), **NO_HUB}},
    ).remote(str(live_dir), output_dir.name, str(output_dir), publish_root, every_s)
