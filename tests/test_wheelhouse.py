"""``raycluster launch --wheelhouse``: the job's packages resolved here for the hosts' platform, by pip itself,
against a local index of hand-made wheels standing in for PyPI (this machine reaches no index in tests)."""

from pathlib import Path

import pytest

from raycluster.errors import UsageError
from raycluster.launch.wheelhouse import resolve_wheelhouse
from wheels import make_wheel


@pytest.fixture
def index(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    make_wheel(index, "standin-app", "1.0", ["standin-lib>=1", "torch>=2", "nvidia-cublas-cu12"])
    make_wheel(index, "standin-lib", "1.0")
    make_wheel(index, "standin-lib", "2.0")
    make_wheel(index, "torch", "2.8.0")
    make_wheel(index, "nvidia-cublas-cu12", "12.8.0")
    return index


def requirements(tmp_path: Path, *lines: str) -> Path:
    (tmp_path / "constraints.txt").write_text("standin-lib<2\n")
    path = tmp_path / "requirements.txt"
    path.write_text("-c constraints.txt\n" + "\n".join(lines) + "\n")
    return path


def test_the_resolved_set_less_the_images_torch_goes_into_the_channel_and_the_collection_is_kept(tmp_path, index):
    collected, look = tmp_path / "collected", ("--no-index", "--find-links", str(index))
    wanted = requirements(tmp_path, "standin-app")
    names = resolve_wheelhouse(wanted, collected, tmp_path / "channel", "3.12", look)
    # The constraint holds (lib 1.0, not 2.0); torch and its CUDA libraries are the image's: never shipped.
    assert names == ["standin_app-1.0-py3-none-any.whl", "standin_lib-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in (tmp_path / "channel").iterdir()) == names
    # A second launch that wants lib 2.0 finds the collection kept, and its channel holds only what it resolved.
    (tmp_path / "constraints.txt").write_text("standin-lib>=2\n")
    again = resolve_wheelhouse(wanted, collected, tmp_path / "channel2", "3.12", look)
    assert again == ["standin_app-1.0-py3-none-any.whl", "standin_lib-2.0-py3-none-any.whl"]
    assert {p.name for p in collected.glob("*.whl")} >= {*names, *again}


def test_a_package_with_no_wheel_for_the_hosts_is_named_in_one_line(tmp_path, index):
    # Only a macOS build of it exists: the hosts (manylinux x86_64, CPython 3.12) cannot install it.
    make_wheel(index, "standin-native", "1.0", tag="cp312-cp312-macosx_11_0_arm64")
    wanted = requirements(tmp_path, "standin-app", "standin-native")
    with pytest.raises(UsageError) as refused:
        resolve_wheelhouse(wanted, tmp_path / "c", tmp_path / "ch", "3.12", ("--no-index", "--find-links", str(index)))
    said = str(refused.value)
    assert "standin-native has no wheel for the hosts (manylinux x86_64, CPython 3.12)" in said, said
    assert "\n" not in said and not (tmp_path / "ch").exists()


def test_a_wheel_built_into_the_collection_is_found(tmp_path, index):
    # The fix the refusal above suggests: a manylinux wheel of it, built by the user into the collection.
    collected = tmp_path / "collected"
    collected.mkdir()
    make_wheel(collected, "standin-native", "1.0", tag="cp312-cp312-manylinux_2_17_x86_64")
    wanted = requirements(tmp_path, "standin-native")
    names = resolve_wheelhouse(wanted, collected, tmp_path / "ch", "3.12", ("--no-index", "--find-links", str(index)))
    assert names == ["standin_native-1.0-cp312-cp312-manylinux_2_17_x86_64.whl"]
