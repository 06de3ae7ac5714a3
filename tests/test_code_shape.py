"""The house rules that keep the code easy to carry on, checked: small modules and functions, and Ray's
public APIs only."""

import ast
import importlib
import re

import pytest

from conftest import REPO

CODE = [p for top in ("raycluster", "entry", "jobs") for p in sorted((REPO / top).rglob("*.py"))]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 250, 50


@pytest.mark.parametrize("path", CODE, ids=lambda p: str(p.relative_to(REPO)))
def test_modules_and_functions_stay_small(path):
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES, f"{node.name} at line {node.lineno}"


def test_only_rays_public_apis():
    private = re.compile(r"\bray\._|\bray\.experimental\.internal_kv\b|\b_internal_kv_\w+")
    hits = [f"{p.relative_to(REPO)}:{i}" for p in CODE for i, line in enumerate(p.read_text().splitlines(), 1)
            if private.search(line)]  # fmt: skip
    assert hits == []


def lerobot_imports(path) -> list[int]:
    """The lines of ``path`` that import LeRobot: an import statement, or a module named to importlib."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module", "find_spec", "__import__"
        ) and node.args and isinstance(node.args[0], ast.Constant):  # fmt: skip
            names = [str(node.args[0].value)]
        else:
            continue
        if any(name == "lerobot" or name.startswith("lerobot.") for name in names):
            lines.append(node.lineno)
    return lines


def test_lerobot_is_imported_behind_its_one_door_alone():
    door = REPO / "raycluster" / "lerobot"
    outside = [p for p in [*CODE, *sorted((REPO / "bench").rglob("*.py"))] if door not in p.parents]
    hits = [f"{p.relative_to(REPO)}:{line}" for p in outside for line in lerobot_imports(p)]
    assert hits == [], f"import LeRobot in raycluster/lerobot/ only: {hits}"
    assert lerobot_imports(door / "lines" / "__init__.py")  # the check sees an import where there is one


SCRIPTS = [p for top in ("jobs", "tests/jobs", "bench") for p in sorted((REPO / top).rglob("*.py"))]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_scripts_import_only_what_raycluster_has(path):
    """Job scripts and benchmarks run only in the slow half or by hand: a name moved out of a module breaks them
    with an ImportError an hour into CI. Every name they import from raycluster must be where they look."""
    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("raycluster"):
            module = importlib.import_module(node.module)
            missing += [
                f"{node.module}.{a.name} (line {node.lineno})" for a in node.names if not hasattr(module, a.name)
            ]
    assert missing == [], f"{path.relative_to(REPO)} imports names its modules lack: {missing}"
