"""What the head's entry point asks of its Ray cluster, through Ray's public state API on the head's own
dashboard: which nodes are alive, and whether a user asked to end an interactive cluster."""

from __future__ import annotations

NAMESPACE = "raycluster"
END_ACTOR = "raycluster-end"
"""The named actor `jobs/end_cluster.py` leaves behind: ends an interactive cluster before its time is up."""


class ClusterState:
    def __init__(self, dashboard_url: str):
        self.address = dashboard_url

    def alive_node_ips(self, timeout: int = 5) -> set[str]:
        # Imported here, once the entry point has put the job's credentials in the environment: Ray reads
        # RAY_AUTH_MODE once, when it is first imported.
        from ray.util.state import list_nodes

        nodes = list_nodes(
            address=self.address, filters=[("state", "=", "ALIVE")], timeout=timeout, raise_on_missing_output=False
        )
        return {node.node_ip for node in nodes}

    def end_requested(self, timeout: int = 5) -> bool:
        from ray.util.state import list_actors

        filters = [("name", "=", END_ACTOR), ("state", "=", "ALIVE")]
        return bool(list_actors(address=self.address, filters=filters, timeout=timeout))


def request_end() -> None:
    """From a driver connected to the cluster (a submitted job): ask the head to end an interactive cluster."""
    import ray

    @ray.remote(num_cpus=0)
    class EndRequest:
        pass

    actor = EndRequest.options(name=END_ACTOR, namespace=NAMESPACE, lifetime="detached", get_if_exists=True).remote()
    ray.get(actor.__ray_ready__.remote(), timeout=60)
