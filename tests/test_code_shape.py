"""The house rules that keep the code easy to carry on, checked: small modules and functions, and Ray's
public APIs only."""

import ast
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
