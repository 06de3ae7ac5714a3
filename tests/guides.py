"""The guides' own commands (pages under docs/, and the README's copies of two of them), read from their pages
so that a test runs exactly what a reader copies."""

import re
import subprocess
from pathlib import Path

from conftest import REPO


def guide_block(page: str, section: str, language: str = "bash") -> str:
    """The first ```bash (or ``language``) block after the line of ``page`` (``"docs/training.md"``, say) that
    starts with ``section`` (a heading, say)."""
    text = (REPO / page).read_text()
    start = text.index(f"\n{section}")
    match = re.search(rf"```{language}\n(.*?)```", text[start:], re.S)
    assert match, f"no {language} block under {section} in {page}"
    return match.group(1)


def run_guide_block(page: str, section: str, cwd: Path) -> subprocess.CompletedProcess:
    """The section's bash block as a user runs it: strict bash, in ``cwd``."""
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", guide_block(page, section)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def guide_command(page: str, section: str, starts: str) -> str:
    """One command of a section's bash block, its continuation lines included."""
    lines = guide_block(page, section).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(starts))
    last = next(i for i in range(first, len(lines)) if not lines[i].rstrip().endswith("\\"))
    return "\n".join(lines[first : last + 1])
