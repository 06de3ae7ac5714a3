"""A user's own kind of Ray job script: list the cluster's nodes and accelerators, run a task on each.

ray job submit --address http://127.0.0.1:8265 -- python jobs/cluster_info.py
"""

import json
import socket

import ray
import ray.util.scheduling_strategies


@ray.remote(num_cpus=0)
def where() -> dict:
    import os

    return {"host": socket.gethostname(), "ip": ray.util.get_node_ip_address(), "pid": os.getpid()}


if __name__ == "__main__":
    ray.init()
    nodes = [n for n in ray.nodes() if n["Alive"]]
    print(f"{len(nodes)} node(s), resources: {json.dumps(ray.cluster_resources())}")
    tasks = [
        where.options(
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote()
        for n in nodes
    ]
    for result in ray.get(tasks):
        print(f"task ran on {result['ip']} ({result['host']}, pid {result['pid']})")
