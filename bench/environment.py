"""``make bench ARGS="--only environment"``: what a host's start pays for the job's environment. The real
requirements (as ``raycluster launch`` stages them, for this machine's torch) over a Python that already holds
torch, as a DLC does: installed from the package index by one pip install (as SageMaker's driver would), as
raycluster's hosts install it (pip's dry run resolves what the image lacks, pip installs uv alone, uv the rest,
with ``--target``), and restored from the archive that install was stored as (unpacked by a pool of processes,
hashed meanwhile, renamed in), as a host restores it once the archive is downloaded: the download from S3 is not
counted (here S3 is a loopback stand-in, slower than S3 is to an instance). No pip or uv cache.

The "image" is a new virtualenv whose site-packages links this machine's torch, torchvision and what they
need, so that pip sees torch installed and never downloads it (the DLC's build stays)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from packaging.requirements import Requirement

from bench.harness import REPO
from raycluster.environment.archive import pack
from raycluster.environment.unpacking import unpack
from raycluster.launch.requirements import constraints, requirements

IMAGE_HAS = ("torch", "torchvision")


def closure(names: tuple[str, ...]) -> set[str]:
    """Those distributions and every one they need, the extras they ask of each other included (torch's CUDA
    libraries are the extras of ``cuda-toolkit``), as installed here."""
    found: set[tuple[str, str]] = set()
    todo = [(name, "") for name in names]
    while todo:
        name, extra = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if (dist.metadata["Name"].lower(), extra) in found:
            continue
        found.add((dist.metadata["Name"].lower(), extra))
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo += [(requirement.name, wanted) for wanted in ["", *requirement.extras]]
    return {name for name, _ in found}


def make_image(at: Path) -> Path:
    """A virtualenv that holds this machine's torch stack (linked, not copied) and nothing else; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(at)], check=True)
    shutil.copytree(Path(sys.executable).parent.parent / "lib" / "python3.12" / "site-packages" / "pip",
                    at / "lib" / "python3.12" / "site-packages" / "pip")  # fmt: skip
    site = at / "lib" / "python3.12" / "site-packages"
    for name in closure(IMAGE_HAS):
        dist = importlib.metadata.distribution(name)
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    return at / "bin" / "python"


def staged(at: Path) -> Path:
    """requirements.txt and constraints.txt as the launch stages them for this machine's torch."""
    at.mkdir()
    release = ".".join(importlib.metadata.version("torch").split(".")[:2])
    (at / "constraints.txt").write_text("\n".join(constraints(release)) + "\n")
    (at / "requirements.txt").write_text("-c constraints.txt\n" + "\n".join(requirements()) + "\n")
    return at / "requirements.txt"


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    """Seconds ``cmd`` took, and what it printed."""
    started = time.monotonic()
    done = subprocess.run(cmd, check=True, env=env, stdout=subprocess.PIPE, text=True)
    return time.monotonic() - started, done.stdout


def run(bench) -> None:
    print("bench: the job's environment from the index (pip; raycluster's: pip resolves, uv installs) and from "
          "its archive ...", flush=True)  # fmt: skip
    work = bench.work / "environment"
    work.mkdir()
    python = make_image(work / "image")
    wanted = staged(work / "code")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    ours = work / "ours"
    install = "import sys; from pathlib import Path; from raycluster.environment.install import install; "
    install += "import subprocess; print('\\n'.join(install(Path(sys.argv[1]), Path(sys.argv[2]), subprocess.run)))"
    ours_s, printed = timed([str(python), "-c", install, str(wanted), str(ours)], env)
    lacking = printed.split()
    by_uv = sum(1 for p in ours.glob("*.dist-info/INSTALLER") if p.read_text().strip() == "uv")
    # The installers alone, on the very set resolved (no resolution in either): pip's --target install of it, as
    # raycluster's hosts fall back to, against uv's (the one raycluster's install put in its bin).
    rest = [pinned for pinned in lacking if not pinned.startswith("uv==")]
    pip_set_s, _ = timed([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                          str(work / "by-pip"), *rest], env)  # fmt: skip
    uv_set_s, _ = timed([str(ours / "bin" / "uv"), "pip", "install", "--quiet", "--no-cache", "--no-deps",
                         "--python", str(python), "--target", str(work / "by-uv"), *rest], env)  # fmt: skip
    # The import check each host runs on what it installed (compiling what the job imports), as the archive holds it.
    check = "import ray, lerobot, accelerate"
    check_s, _ = timed([str(python), "-c", check], {**env, "PYTHONPATH": str(ours)})
    archive = work / "environment.tar"
    started = time.monotonic()
    digest = pack(ours, archive)
    pack_s = time.monotonic() - started
    started = time.monotonic()
    unpack(archive, digest, work / "restored")
    restore_s = time.monotonic() - started
    # The floor under it: GNU tar's extract of the same archive, unchecked and unhashed, in one process.
    (work / "by-tar").mkdir()
    tar_s, _ = timed(["tar", "-xf", str(archive), "-C", str(work / "by-tar")], env)
    # What every start pays anyway, restored or installed: the first import (not counted in either).
    started = time.monotonic()
    subprocess.run([str(python), "-c", check], env={**env, "PYTHONPATH": str(work / "restored")}, check=True)
    import_s = time.monotonic() - started
    # The baseline, last since it changes the image: one pip install of the requirements into the image, as
    # SageMaker's driver runs it.
    pip_s, _ = timed([str(python), "-m", "pip", "install", "--quiet", "-r", str(wanted)], env)
    ratio = restore_s / pip_s
    print(f"restore_over_pip = {ratio:.3f}  ({len(lacking)} distributions, {by_uv} of them installed by uv; archive "
          f"{archive.stat().st_size / 2**20:.0f} MB, packed in {pack_s:.1f} s; its download from S3 not counted; "
          f"importing ray, lerobot, accelerate: {check_s:.1f} s as installed, {import_s:.1f} s as restored)")  # fmt: skip
    bench.rows += [
        ("environment", "s, the resolved set: pip | uv", pip_set_s, uv_set_s, f"{uv_set_s / pip_set_s:.2f}x", ""),
        ("environment", "s to install: pip | raycluster's (uv)", pip_s, ours_s, f"{ours_s / pip_s:.2f}x", ""),
        ("environment", "s: pip install | restore", pip_s, restore_s, f"{ratio:.3f}x", "<= 0.1"),
        ("environment", "s to unpack: GNU tar -x | restore", tar_s, restore_s, f"{restore_s / tar_s:.2f}x", ""),
    ]
