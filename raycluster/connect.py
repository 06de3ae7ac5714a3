"""Reaching a Ray cluster from a driver: a private local one for this run, or one that is running."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import ray

from raycluster.errors import UsageError

log = logging.getLogger(__name__)


@contextlib.contextmanager
def ray_cluster(address: str) -> Iterator[None]:
    """``local``: start a private cluster (Ray stops exactly its own processes on shutdown, never
    others on the machine); ``auto`` or ``HOST:PORT``: join a running cluster and only disconnect."""
    scratch = None
    if address == "local":
        # Ray's processes inherit TMPDIR: their temp files (multiprocessing's pymp-*, left behind by any
        # process that is killed) and Ray's session dir go into a directory removed with the cluster
        # (kept when the run fails, for its logs).
        scratch = tempfile.mkdtemp(prefix="raycluster-tmp-")
        saved, os.environ["TMPDIR"] = os.environ.get("TMPDIR"), scratch
        try:
            context = ray.init(include_dashboard=True, dashboard_host="127.0.0.1", log_to_driver=True)
        finally:
            os.environ.pop("TMPDIR") if saved is None else os.environ.__setitem__("TMPDIR", saved)
        log.info("started a local Ray cluster; dashboard: http://%s", context.dashboard_url)
    else:
        try:
            context = ray.init(address=address, log_to_driver=True)
        except ConnectionError as exc:
            raise UsageError(
                f"--cluster.address={address}: no Ray cluster answers there ({exc}); "
                "start one or use --cluster.address=local"
            ) from None
        log.info("joined the Ray cluster at %s; dashboard: http://%s", address, context.dashboard_url)
    failed = False
    try:
        yield
    except UsageError:  # bad input, said in one line: the session holds nothing more to read
        raise
    except BaseException:
        failed = True
        raise
    finally:
        ray.shutdown()
        if scratch is not None and failed:
            log.info("this failed run's Ray session (logs under ray/session_*/logs) is kept in %s", scratch)
        elif scratch is not None:
            remove_scratch(Path(scratch))


def remove_scratch(scratch: Path, tries: int = 20) -> None:
    """The local cluster's scratch, gone: a Ray process that outlives ``ray.shutdown()`` by a moment may still
    write a file into its session (its metrics' service discovery), so the removal is tried again, bounded."""
    for _ in range(tries):
        shutil.rmtree(scratch, ignore_errors=True)
        if not scratch.exists():
            return
        time.sleep(0.25)
    log.warning("could not remove the local Ray cluster's scratch %s", scratch)


def check_capacity(num_workers: int, use_gpu: bool, cpus_per_worker: float) -> None:
    """Refuse a worker count the cluster can never place, instead of waiting forever."""
    resources = ray.cluster_resources()
    if use_gpu:
        have, need, kind = resources.get("GPU", 0), num_workers, "GPU"
    else:
        have, need, kind = resources.get("CPU", 0), num_workers * cpus_per_worker, "CPU"
    if need > have:
        raise UsageError(
            f"--cluster.num_workers={num_workers} needs {need:g} {kind}s but the cluster has {have:g}; "
            f"lower --cluster.num_workers or add nodes"
        )
