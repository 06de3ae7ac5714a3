"""Ends an interactive cluster (hyperparameter ``entry.keep_alive_s``) before its time is up.

ray job submit --address http://localhost:8265 -- python jobs/end_cluster.py
"""

import sys
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raycluster.sagemaker.cluster_state import request_end  # noqa: E402

if __name__ == "__main__":
    ray.init()
    request_end()
    print("asked the head to end the cluster")
