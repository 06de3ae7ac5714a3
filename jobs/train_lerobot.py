"""Ray job script: LeRobot training on the cluster this job was submitted to.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python jobs/train_lerobot.py --cluster.num_workers=2 --policy.type=act --dataset.root=...

Takes exactly the flags of ``raycluster train``; the cluster defaults to the one running the job.
"""

import sys
from pathlib import Path

# Submitted with --working-dir, the job runs from an unpacked copy of the source, not an install.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raycluster.logs import configure  # noqa: E402
from raycluster.process_exit import exit_now  # noqa: E402
from raycluster.training.driver.train_job import train  # noqa: E402

if __name__ == "__main__":
    configure()
    exit_now(train(["--cluster.address=auto", *sys.argv[1:]]))
