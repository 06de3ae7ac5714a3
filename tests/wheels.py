"""Hand-made wheels: a local index that stands in for PyPI in tests (this machine reaches no index there)."""

import importlib.metadata
import zipfile
from pathlib import Path


def make_wheel(index: Path, name: str, version: str, requires=(), tag: str = "py3-none-any", body: str = "") -> Path:
    """A minimal wheel, as a build backend makes one: its metadata is all pip reads to resolve."""
    dist = f"{name.replace('-', '_')}-{version}"
    wheel = index / f"{dist}-{tag}.whl"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{dist}.dist-info/METADATA", metadata)
        zf.writestr(f"{dist}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        zf.writestr(f"{name.replace('-', '_')}/__init__.py", f"VERSION = {version!r}\n{body}")
        zf.writestr(f"{dist}.dist-info/RECORD", "")
    return wheel


def repack_installed(index: Path, name: str, tag: str = "py3-none-linux_x86_64") -> Path:
    """The wheel an installed distribution came from, made again from its installed files (its scripts, such as
    uv's binary, as the wheel's ``.data/scripts``): a real package for a local index, with no download."""
    dist = importlib.metadata.distribution(name)
    stem = f"{name.replace('-', '_')}-{dist.version}"
    wheel = index / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for file in dist.files or []:
            parts = file.parts
            if parts[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json") or "__pycache__" in parts:
                continue
            if parts[0] == "..":  # installed outside site-packages: a script in the environment's bin
                zf.write(file.locate(), f"{stem}.data/scripts/{parts[-1]}")
            else:
                zf.write(file.locate(), file.as_posix())
        zf.writestr(f"{stem}.dist-info/RECORD", "")
    return wheel
