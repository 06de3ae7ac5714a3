"""Hand-made wheels: a local index that stands in for PyPI in tests (this machine reaches no index there)."""

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
