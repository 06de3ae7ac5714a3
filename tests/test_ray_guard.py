"""The markers mean what they say: a test marked neither ``cluster`` nor ``slow`` that starts Ray, in this
process or in a process of its own, fails (``ray_guard.py``), so ``make test-fast`` starts no Ray."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster  # the tests it runs start Ray

INNER = """
import subprocess, sys

import pytest
import ray


def test_unmarked_in_process():
    ray.init(num_cpus=1, include_dashboard=False)
    ray.shutdown()


def test_unmarked_in_a_process_of_its_own():
    code = "import ray; ray.init(num_cpus=1, include_dashboard=False); ray.shutdown()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.cluster
def test_marked():
    ray.init(num_cpus=1, include_dashboard=False)
    ray.shutdown()


def test_no_ray():
    assert True
"""


def test_an_unmarked_test_that_starts_ray_fails_naming_it(pytester, monkeypatch):
    pytester.makepyfile(test_inner=INNER)
    pytester.makeini("[pytest]\nmarkers =\n    cluster: starts Ray\n    slow: trains\n")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    result = pytester.runpytest_subprocess("-p", "ray_guard", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked_in_process started Ray (gcs_server (pid *marked neither 'cluster' nor 'slow'*",
            "*test_unmarked_in_a_process_of_its_own started Ray (*marked neither 'cluster' nor 'slow'*",
        ],
        consecutive=False,
    )
