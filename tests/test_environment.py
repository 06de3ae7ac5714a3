"""The job's environment cached (issue 40): installed by pip once, stored as one archive in S3 (a moto server,
through real boto3), restored at the next start with the same key with no installer and no index, refused when
the archive is not what its record says, made anew when the requirements change, and kept on the host (a warm
pool's persistent cache) with no download at all. The packages are hand-made wheels in a local index."""

import compileall
import hashlib
import json
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import boto3
import pytest

from conftest import REPO
from raycluster.environment.archive import pack
from raycluster.environment.prepare import MARKER, EnvironmentSettings, activate, prepare_environment
from raycluster.environment.unpacking import unpack
from wheels import make_wheel, repack_installed

CHECK = ("standin_app", "standin_lib")


@pytest.fixture
def job(tmp_path, s3_server):
    """A job's code channel: requirements.txt naming the local index and no other, constraints beside it."""
    index = tmp_path / "index"
    index.mkdir()
    make_wheel(index, "standin-app", "1.0", ["standin-lib"])
    make_wheel(index, "standin-lib", "1.0")
    make_wheel(index, "standin-lib", "2.0")
    code = tmp_path / "code"
    code.mkdir()
    (code / "constraints.txt").write_text("standin-lib<2\n")
    (code / "requirements.txt").write_text(f"--no-index\n--find-links {index}\n-c constraints.txt\nstandin-app\n")
    return code, index


def host(tmp_path, name: str, code: Path, **kwargs) -> EnvironmentSettings:
    return EnvironmentSettings(code / "requirements.txt", tmp_path / name, CHECK, **kwargs)


def version_of(overlay: Path, module: str) -> str:
    code = f"import {module}; print({module}.VERSION)"
    return subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(overlay)}, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip


def test_installed_once_then_restored_with_no_index_refused_when_altered_and_new_when_the_requirements_change(
    tmp_path, job, caplog
):
    code, index = job
    caplog.set_level("INFO")
    cache = "s3://ckpts/env-cache"
    first = prepare_environment(host(tmp_path, "algo-1", code, cache_s3=cache, stores=True), subprocess.run)
    assert json.loads((first / MARKER).read_text())["installed"] == ["standin-app==1.0", "standin-lib==1.0"]
    assert installer(first, "standin_lib-1.0") == "uv"  # the image's uv installed what pip resolved
    assert version_of(first, "standin_lib") == "1.0"
    [stored] = boto3.client("s3").list_objects_v2(Bucket="ckpts", Prefix="env-cache/")["Contents"]
    assert stored["Key"] == f"env-cache/{first.name}.tar"

    # The next start (another host, a restarted job): no index at all, so only a restore can make it.
    index.rename(tmp_path / "gone")
    second = prepare_environment(host(tmp_path, "algo-2", code, cache_s3=cache), subprocess.run)
    assert second.name == first.name and version_of(second, "standin_app") == "1.0"
    assert f"environment {first.name[:12]}: restored from {cache}" in caplog.text

    # An archive that is not what its record says is refused whole and the environment installed again.
    (tmp_path / "gone").rename(index)
    s3 = boto3.client("s3")
    digest = s3.head_object(Bucket="ckpts", Key=stored["Key"])["Metadata"]["sha256"]
    s3.put_object(Bucket="ckpts", Key=stored["Key"], Body=b"not an archive", Metadata={"sha256": digest})
    third = prepare_environment(host(tmp_path, "algo-3", code, cache_s3=cache), subprocess.run)
    assert "is refused (its SHA-256 is" in caplog.text and version_of(third, "standin_lib") == "1.0"
    assert not list((tmp_path / "algo-3").glob(".*"))  # nothing half unpacked or half installed left

    # Another requirement, another key: installed, never the old archive.
    (code / "constraints.txt").write_text("standin-lib>=2\n")
    fourth = prepare_environment(host(tmp_path, "algo-1", code, cache_s3=cache, stores=True), subprocess.run)
    assert fourth.name != first.name and version_of(fourth, "standin_lib") == "2.0"
    assert list((tmp_path / "algo-1").iterdir()) == [fourth]  # the host keeps one environment, not every one


def test_an_environment_kept_on_the_host_is_used_with_no_download_and_one_not_whole_is_made_again(
    tmp_path, job, caplog
):
    code, index = job
    caplog.set_level("INFO")
    kept = prepare_environment(host(tmp_path, "warm", code), subprocess.run)
    shutil.rmtree(index)  # no index, no S3: only the kept copy can serve
    assert prepare_environment(host(tmp_path, "warm", code), subprocess.run) == kept
    assert "kept on this host" in caplog.text
    # A kept copy without its marker is not whole (it never was renamed into place complete): made again.
    (kept / MARKER).unlink()
    with pytest.raises(RuntimeError, match="resolving"):  # with the index gone, that fails loudly
        prepare_environment(host(tmp_path, "warm", code), subprocess.run)


def test_an_environment_that_does_not_import_is_never_used_or_stored(tmp_path, job):
    code, index = job
    # standin-lib 1.0 that raises on import: what pip installed is checked before anything uses it.
    make_wheel(index, "standin-lib", "1.0", body="raise ImportError('built for another image')\n")
    settings = host(tmp_path, "algo-1", code, cache_s3="s3://ckpts/broken", stores=True)
    with pytest.raises(RuntimeError, match="does not import: ImportError: built for another image"):
        prepare_environment(settings, subprocess.run)
    assert boto3.client("s3").list_objects_v2(Bucket="ckpts", Prefix="broken/").get("KeyCount", 0) == 0
    assert not list((tmp_path / "algo-1").iterdir())  # nor kept on the host, for the next start to take as whole


def installer(overlay: Path, dist: str) -> str:
    return (overlay / f"{dist}.dist-info" / "INSTALLER").read_text().strip()


def test_an_image_without_uv_installs_uv_alone_with_pip_and_uv_installs_the_rest(tmp_path, job):
    """As a DLC's host does: uv is one of the job's packages (raycluster's ``hosts`` extra), not the image's."""
    code, index = job
    repack_installed(index, "uv")  # the real uv, as a wheel in the local index
    (code / "requirements.txt").write_text((code / "requirements.txt").read_text() + "uv\n")
    image = tmp_path / "image"  # a Python with pip and nothing else: no uv
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True)
    run = "import subprocess, sys; from pathlib import Path; from raycluster.environment.install import install; "
    run += "print(install(Path(sys.argv[1]), Path(sys.argv[2]), subprocess.run))"
    overlay = tmp_path / "overlay"
    done = subprocess.run([str(image / "bin" / "python"), "-c", run, str(code / "requirements.txt"), str(overlay)],
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert installer(overlay, "uv-0.13.9") == "pip" and (overlay / "bin" / "uv").is_file()
    assert installer(overlay, "standin_app-1.0") == installer(overlay, "standin_lib-1.0") == "uv"
    assert version_of(overlay, "standin_lib") == "1.0"


def test_a_uv_that_fails_is_said_and_pip_installs_the_set_from_the_start(tmp_path, job, caplog):
    code, _ = job

    def uv_fails(command, **kwargs):  # uv refused at the index (a token pip has and uv does not, say), midway
        if "uv" in command[:3]:
            target = Path(command[command.index("--target") + 1])
            (target / "standin_app").mkdir()
            (target / "standin_app" / "__init__.py").write_text("raise ImportError('half installed')\n")
            return subprocess.CompletedProcess(command, 2, "", "error: Failed to fetch https://me:s3cret@index/x.whl\n")
        return subprocess.run(command, **kwargs)

    overlay = prepare_environment(host(tmp_path, "algo-1", code), uv_fails)
    assert installer(overlay, "standin_app-1.0") == installer(overlay, "standin_lib-1.0") == "pip"
    assert (
        "uv could not install the job's packages (installing: error: Failed to fetch https://***@index" in caplog.text
    )
    assert "s3cret" not in caplog.text  # an index's token in uv's words is never logged
    assert version_of(overlay, "standin_lib") == "1.0" and version_of(overlay, "standin_app") == "1.0"


def test_a_wheel_that_changed_after_pip_resolved_it_is_installed_by_neither_installer(tmp_path, job):
    """pip's report carries each file's SHA-256: uv checks it, and so does pip's install after a uv that failed."""
    code, index = job

    def changed_after_resolving(command, **kwargs):
        done = subprocess.run(command, **kwargs)
        if "--dry-run" in command:  # resolved: now the index serves other bytes under the same name
            make_wheel(index, "standin-lib", "1.0", body="SWAPPED = True\n")
        return done

    with pytest.raises(RuntimeError, match="(?i)hash"):
        prepare_environment(host(tmp_path, "algo-1", code), changed_after_resolving)
    assert not list((tmp_path / "algo-1").iterdir())  # nothing installed is left for a next start to take


def test_what_runs_before_the_environment_needs_nothing_but_the_standard_library():
    """The entry point imports these before the job's packages exist on a fresh host (boto3 only when S3 is
    reached, and the image has it): with no site-packages at all, they import."""
    modules = ["raycluster.environment.host", "raycluster.layout", "raycluster.sagemaker.failure",
               "raycluster.sagemaker.stop_clock"]  # fmt: skip
    code = "import importlib, sys; sys.path.insert(0, sys.argv[1]); [importlib.import_module(m) for m in sys.argv[2:]]"
    done = subprocess.run([sys.executable, "-S", "-I", "-c", code, str(REPO), *modules], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(REPO / "entry" / "__main__.py") as f:  # and the entry point imports nothing else before them
        before = f.read().split("prepare_this_host(")[0]
    imported = {line.split()[1] for line in before.splitlines() if line.startswith(("import ", "from "))}
    assert imported <= {"logging", "os", "signal", "sys", "time", *modules}, imported


def test_the_environment_comes_first_for_this_process_and_its_children(tmp_path, job):
    code, _ = job
    overlay = prepare_environment(host(tmp_path, "algo-1", code), subprocess.run)
    environ = {"PATH": "/usr/bin", "PYTHONPATH": "/elsewhere"}
    activate(overlay, environ)
    assert environ["PYTHONPATH"].split(":") == [str(overlay), "/elsewhere"]
    assert environ["PATH"].split(":")[0] == str(overlay / "bin")
    sys.path.remove(str(overlay))  # this test's process is the pytest run's: left as it was


def test_a_restored_archive_keeps_its_modules_compiled_its_modes_and_its_links_and_refuses_a_path_out(tmp_path):
    """What any unpack must keep of what was packed. A module's compiled copy stays valid only while its source
    keeps its mtime, so the restored one imports with no compile."""
    packed = tmp_path / "packed"
    (packed / "pkg" / "sub").mkdir(parents=True)
    for i in (1, 7):
        (packed / "pkg" / "sub" / f"m{i}.py").write_text(f"VALUE = {i}\n")
    (packed / "pkg" / "__init__.py").write_text("from pkg.sub import m7\nVALUE = m7.VALUE\n")
    (packed / "pkg" / "sub" / "__init__.py").write_text("")
    (packed / "bin").mkdir()
    (packed / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
    (packed / "bin" / "tool").chmod(0o755)
    (packed / "bin" / "alias").symlink_to("tool")
    os.link(packed / "pkg" / "sub" / "m1.py", packed / "pkg" / "same.py")
    compileall.compile_dir(packed, quiet=1)
    archive = tmp_path / "environment.tar"
    restored = tmp_path / "restored"
    unpack(archive, pack(packed, archive), restored)

    compiled = restored / "pkg" / "__pycache__" / f"__init__.{sys.implementation.cache_tag}.pyc"
    before = compiled.stat().st_mtime_ns
    code = "import pkg; print(pkg.VALUE)"
    done = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(restored)}, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "7" and compiled.stat().st_mtime_ns == before  # used as it was, not compiled again
    assert subprocess.run([restored / "bin" / "alias"], capture_output=True, text=True).stdout == "tool ran\n"
    assert (restored / "pkg" / "same.py").stat().st_ino == (restored / "pkg" / "sub" / "m1.py").stat().st_ino
    assert sorted(p.relative_to(restored) for p in restored.rglob("*")) == sorted(
        p.relative_to(packed) for p in packed.rglob("*")
    )

    # A member whose path leads out of the place is refused, and nothing of the archive is left behind.
    outside = tmp_path / "outside"
    with tarfile.open(archive, "w") as tar:
        tar.add(packed / "pkg" / "sub" / "m1.py", arcname="../outside")
    with pytest.raises(tarfile.FilterError):
        unpack(archive, hashlib.sha256(archive.read_bytes()).hexdigest(), tmp_path / "again")
    assert not outside.exists() and not list(tmp_path.glob("*again*"))
    assert not multiprocessing.active_children()  # the unpack's pool is gone with it


def test_the_unpacks_pool_ends_on_sigterm_in_a_process_that_keeps_sigterm_for_itself():
    """The entry point keeps SIGTERM to stop the job in order, and the unpack's pool, forked from it, ends its
    processes with SIGTERM: one that kept the handler would live on, and the unpack would wait for it for ever
    (as a simulated host's did)."""
    code = """
import os, signal, time
from pathlib import Path
from raycluster.environment.unpacking import pool_of_processes
signal.signal(signal.SIGTERM, lambda *_: None)
pool = pool_of_processes()
pid = pool.apply(os.getpid)
os.kill(pid, signal.SIGTERM)
deadline = time.monotonic() + 10
while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:  # the pool reaps it once it ended
    time.sleep(0.1)
print("ended" if not Path(f"/proc/{pid}").exists() else "lives on", flush=True)
os.killpg(0, signal.SIGKILL)  # this process and its pool, whichever way it went
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          start_new_session=True)  # fmt: skip
    assert done.stdout.strip() == "ended", done.stdout + done.stderr[-2000:]


def tree(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: its kind, mode, and content or link (a file's mtime too)."""
    found = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if path.is_symlink():
            found[str(path.relative_to(root))] = ("link", os.readlink(path))
        elif path.is_dir():
            found[str(path.relative_to(root))] = ("dir", oct(stat.S_IMODE(st.st_mode)))
        else:
            found[str(path.relative_to(root))] = ("file", oct(stat.S_IMODE(st.st_mode)), path.read_text(), st.st_mtime)
    return found


def test_files_under_a_link_or_a_directory_the_archive_never_listed_land_where_one_plain_extract_puts_them(tmp_path):
    """The unpack writes most files from a pool of processes, yet gives what one plain ``extractall`` with the
    ``data`` filter gives: a file under a link goes through the link, a directory the archive never listed is
    made, modes are the filter's. A link out of the place is refused whichever order its members come in, and a
    path twice (which a plain extract would overwrite, or write through) is refused too."""
    source = tmp_path / "source.py"
    source.write_text("VALUE = 1\n")
    archive = tmp_path / "environment.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(tmp_path, arcname=".", recursive=False)
        for i in range(1200):  # more than one pool task
            tar.add(source, arcname=f"./many/m{i}.py")  # "many" itself is never listed
        real = tarfile.TarInfo("./real")
        real.type, real.mode = tarfile.DIRTYPE, 0o777
        tar.addfile(real)
        alias = tarfile.TarInfo("./alias")
        alias.type, alias.linkname = tarfile.SYMTYPE, "real"
        tar.addfile(alias)
        tar.add(source, arcname="./alias/through.py")
        tar.add(source, arcname="./real/same.py")
        hard = tarfile.TarInfo("./real/hard.py")
        hard.type, hard.linkname = tarfile.LNKTYPE, "./real/same.py"
        tar.addfile(hard)
    restored = tmp_path / "restored"
    unpack(archive, hashlib.sha256(archive.read_bytes()).hexdigest(), restored)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "plain", filter="data")
    assert tree(restored) == tree(tmp_path / "plain")
    assert (restored / "real" / "through.py").read_text() == "VALUE = 1\n" and (restored / "alias").is_symlink()
    assert len(list((restored / "many").iterdir())) == 1200

    out = tarfile.TarInfo("./real/out")  # a link out, then a file through it
    out.type, out.linkname = tarfile.SYMTYPE, "../../.."
    again = tarfile.TarInfo("./alias")  # a directory where a link was
    again.type = tarfile.DIRTYPE
    for refused, first, then in ((tarfile.FilterError, out, "./real/out/escaped.py"),
                                 (tarfile.ExtractError, again, "./alias/f.py")):  # fmt: skip
        shutil.copy(archive, tmp_path / "changed.tar")
        with tarfile.open(tmp_path / "changed.tar", "a", format=tarfile.GNU_FORMAT) as tar:
            tar.addfile(first)
            tar.add(source, arcname=then)
        with pytest.raises(refused):
            unpack(tmp_path / "changed.tar", hashlib.sha256((tmp_path / "changed.tar").read_bytes()).hexdigest(),
                   tmp_path / "again")  # fmt: skip
        assert not (tmp_path.parent / "escaped.py").exists() and not list(tmp_path.glob("*again*"))
        assert not multiprocessing.active_children()
