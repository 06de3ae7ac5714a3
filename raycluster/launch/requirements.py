"""What the container installs: raycluster's own dependencies, read from its package metadata, so the
job runs what `make test` ran; never torch, whose DLC build (CUDA, NCCL, EFA) must stay."""

from __future__ import annotations

import importlib.metadata
import re

from packaging.requirements import Requirement

from raycluster.errors import UsageError

PACKAGE = "raycluster"
# The DLC's torch decides these: torchvision 0.(N+15) goes with torch 2.N; torchcodec's pairs come from its
# compatibility table. A torch outside the table is refused rather than guessed.
TORCHCODEC = {"2.8": ">=0.6,<0.8", "2.9": ">=0.8,<0.10", "2.10": ">=0.10,<0.11", "2.11": ">=0.11,<0.12"}
# The PyTorch training DLCs whose Python lerobot (>=3.12) can run on: py312 from 2.8 on.
DLC_PYTHON = "py312"
CONTAINER_EXTRAS = ("curves", "hosts")
"""What every job's hosts install: its curves' store, and uv (what the hosts install the job's packages with)."""
ENV_EXTRAS = ("pusht",)
"""Simulations raycluster's extras install for a job that rolls out in one (``--env.type``)."""


def torch_release(version: str) -> str:
    match = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", version)
    if not match:
        raise UsageError(f"--framework-version {version!r}: expected a PyTorch release such as 2.8")
    release = f"{match.group(1)}.{match.group(2)}"
    if release not in TORCHCODEC:
        raise UsageError(
            f"--framework-version {version}: LeRobot 0.6 runs on PyTorch DLCs {', '.join(TORCHCODEC)}; "
            "pick one of those (or --image-uri for your own image)"
        )
    return release


def requirements(env_type: str | None = None) -> list[str]:
    """raycluster's runtime dependencies as its metadata declares them, with the extras every job's hosts use
    (its curves; uv, which installs the rest) and the extra of the job's ``--env.type`` when raycluster has one
    (``pusht``: its rollouts), less torch (the DLC's)."""
    required = importlib.metadata.requires(PACKAGE) or []
    extras = [*CONTAINER_EXTRAS, *([env_type] if env_type in ENV_EXTRAS else [])]
    kept = []
    for line in required:
        requirement = Requirement(line)
        if requirement.marker is not None and "extra" in str(requirement.marker):
            if not any(requirement.marker.evaluate({"extra": extra}) for extra in extras):
                continue
            requirement.marker = None
        if requirement.name == "torch":
            continue
        kept.append(str(requirement))
    return kept


def constraints(framework_version: str) -> list[str]:
    release = torch_release(framework_version)
    minor = int(release.split(".")[1])
    return [f"torch=={release}.*", f"torchvision==0.{minor + 15}.*", f"torchcodec{TORCHCODEC[release]}"]
