"""What SageMaker runs on every host: read the job, then play this host's role, the head
(``head.py``) or a worker host (``worker_host.py``), and end with one exit code and one reason.

Exit codes: the head exits with the job driver's own code; a worker host exits 0 once the head says the
job ended; 143 after SIGTERM; 2 for a malformed job; 1 for any other failure. Any failure writes one short
reason to ``<base>/output/failure`` (SageMaker's FailureReason).
"""

from __future__ import annotations

import logging
import os

from raycluster.cluster_config import split_cluster_args
from raycluster.errors import UsageError
from raycluster.faults import Faults
from raycluster.layout import sagemaker_base
from raycluster.sagemaker.entry_settings import EntrySettings
from raycluster.sagemaker.failure import HostFailure, write_failure
from raycluster.sagemaker.head import Head
from raycluster.sagemaker.host_node import auth_env
from raycluster.sagemaker.hyperparameters import split_hyperparameters
from raycluster.sagemaker.job_env import hub_cache_env, tracker_env
from raycluster.sagemaker.job_plan import check_kept_on_sagemaker, job_flags, job_script, trains
from raycluster.sagemaker.reaper import OrphanReaper
from raycluster.sagemaker.secrets import read_secrets
from raycluster.sagemaker.stop_clock import StopClock
from raycluster.sagemaker.topology import Topology, read_topology
from raycluster.sagemaker.wheels import install_shipped_wheels
from raycluster.sagemaker.worker_host import WorkerHost

log = logging.getLogger(__name__)


def read_job(environ, environment_s: float = 0.0) -> tuple[Topology, EntrySettings, list[str]]:
    """The topology, the entry settings and the job's flags (the topology's defaults in them), each checked
    before any cluster starts."""
    topology = read_topology(environ)
    settings, flags = split_hyperparameters(topology.hyperparameters)
    job_script(settings)
    if not settings.head_trains and len(topology.hosts) == 1:
        raise UsageError(
            "hyperparameter entry__head_trains=false needs 2 or more hosts: this job's only host "
            "is the head, so no host would train"
        )
    flags = job_flags(topology, settings, flags, environment_s)
    if trains(settings):
        cluster, _ = split_cluster_args(flags)  # cluster.* out of range: refused here
        check_kept_on_sagemaker(cluster, topology.base)
    return topology, settings, flags


def main(stop: StopClock, environment_s: float = 0.0) -> int:
    """``stop``: set on SIGTERM (the caller installs the handler as its first act); ``environment_s``: what
    making the job's environment took this host (the ledger's)."""
    base = sagemaker_base(os.environ)
    reaper = OrphanReaper()
    try:
        topology, settings, flags = read_job(os.environ, environment_s)
        # Before any Ray node starts, which every rank inherits its environment from; a secret that cannot be
        # read ends the job here, on every host, before a cluster is half made.
        os.environ.update(read_secrets(os.environ))
        os.environ.update(hub_cache_env(topology.channels))
        os.environ.update(tracker_env(os.environ))
        # Before any Ray node starts: the nodes, the job's driver and its workers inherit PYTHONPATH.
        install_shipped_wheels(os.environ, reaper.run)
        # This process talks to the cluster too: it needs the same credentials as the nodes, in the environment
        # before anything imports Ray (Ray reads its auth mode once, on import).
        os.environ.update(auth_env(settings))
        log.info(
            "host %s of %s; head %s; %d GPU(s), %d CPU(s)",
            topology.current_host,
            list(topology.hosts),
            topology.head_host,
            topology.num_gpus,
            topology.num_cpus,
        )
        if topology.is_head:
            return Head(topology, settings, flags, stop, reaper).run()
        return WorkerHost(topology, settings, stop, reaper, Faults.from_env(os.environ)).run()
    except (UsageError, HostFailure, RuntimeError) as exc:
        write_failure(base, str(exc))
        log.error("%s", exc)
        return 2 if isinstance(exc, UsageError) else getattr(exc, "exit_code", 1)
    except Exception as exc:  # every way out leaves a reason: an unforeseen error too, with its traceback in the log
        log.exception("unexpected error on this host")
        write_failure(base, f"unexpected error: {type(exc).__name__}: {exc}")
        return 1
