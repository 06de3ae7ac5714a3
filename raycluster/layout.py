"""Where things are, declared once: the ports, paths and file names that the launcher, the entry point on
every host and the job scripts must agree on."""

from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent.parent
"""The source tree: a checkout here, the unpacked code channel (``/opt/ml/input/data/code``) on SageMaker."""
AUTH_TOKEN_FILE = ".raycluster/auth_token"
"""The job's Ray auth token, relative to the source tree: `raycluster launch` ships it with the code."""
AUTH_TOKEN_ENV = "RAYCLUSTER_AUTH_TOKEN_FILE"
"""Overrides where the entry point looks for the token (the simulated hosts set it)."""
GCS_PORT = 6379
DASHBOARD_PORT = 8265
"""Ray's dashboard and Jobs API, on the head's loopback on SageMaker (reached through SSM port forwarding)."""
DASHBOARD_AGENT_PORT = 52365
"""Ray's default port of each node's dashboard agent: the Jobs API hands every submitted job to the head's agent,
and refuses a job ("No available agent") while that agent has not started."""
CURVES_PORT = 8266
"""The running job's live curves (trackio's dashboard, read-only) on the head's loopback on SageMaker,
reached through a second SSM port forwarding beside the dashboard's."""
OUTCOME_PORT = 6390
"""The head's answer to its worker hosts: how the job ended (token-checked, on the cluster's network)."""
SCRATCH = Path("/tmp/raycluster")
"""Node-local scratch on every SageMaker host, the same path on each: Ray's temp dir and LeRobot's
output_dir. What must survive goes to /opt/ml through the checkpoint keeper."""
SHIPPED_WHEELS = "wheels"
"""Wheels that `raycluster launch --wheel` ships with the code, relative to the source tree; every host
installs them under ``SCRATCH`` before its Ray node starts."""
BASE_ENV = "RAYCLUSTER_SM_BASE"
"""Overrides ``/opt/ml`` (tests and ``raycluster sim`` give each simulated host its own)."""
DEFAULT_BASE = Path("/opt/ml")


def sagemaker_base(env) -> Path:
    return Path(env.get(BASE_ENV) or DEFAULT_BASE)
