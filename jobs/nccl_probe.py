"""Ray job script: all-reduce bandwidth across every worker of this cluster and the transport in use.

    ray job submit --address http://127.0.0.1:8265 -- python jobs/nccl_probe.py --cluster.num_workers=2

On SageMaker, the hyperparameter entry.preflight=true runs it before training.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raycluster.logs import configure  # noqa: E402
from raycluster.probe import probe_cluster  # noqa: E402

if __name__ == "__main__":
    configure()
    sys.exit(probe_cluster(["--cluster.address=auto", *sys.argv[1:]]))
