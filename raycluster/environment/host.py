"""A SageMaker host's environment, first thing at its start: the code channel's ``requirements.txt`` restored
or installed (SageMaker's driver installs nothing: the launch gives it no requirements file), and put first on
the path of this process and of everything it starts."""

from __future__ import annotations

import subprocess
from pathlib import Path

from raycluster.environment.prepare import WARM_POOL_DIR, EnvironmentSettings, activate, prepare_environment
from raycluster.layout import SCRATCH

CACHE_ENV = "RAYCLUSTER_ENV_CACHE_S3"
"""The ``s3://`` prefix of the job's environment archives, in the request's Environment (set by the launch)."""
WARM_POOL_ENV = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"
"""SageMaker's persistent cache on a warm pool's hosts: kept from one job to the next on the same instances."""
CHECKED = ("ray", "lerobot", "accelerate")
"""What the environment exists for: one just installed that cannot import these is neither used nor kept."""
STORING_HOST = "algo-1"
"""The one host that stores the archive it installed (every host installs alike; one upload is enough)."""


def prepare_this_host(environ, code: Path) -> Path | None:
    """The environment of the job whose code channel is ``code``, active; None when the channel holds no
    requirements (a source dir staged for a user's own ``ModelTrainer``, whose driver installs them)."""
    requirements = code / "requirements.txt"
    if not requirements.is_file():
        return None
    warm_pool = environ.get(WARM_POOL_ENV)
    settings = EnvironmentSettings(
        requirements,
        Path(warm_pool) / WARM_POOL_DIR if warm_pool else SCRATCH / "environments",
        CHECKED,
        cache_s3=environ.get(CACHE_ENV) or None,
        stores=environ.get("SM_CURRENT_HOST") == STORING_HOST,
    )
    overlay = prepare_environment(settings, subprocess.run)
    activate(overlay, environ)
    return overlay
