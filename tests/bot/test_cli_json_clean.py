"""`evalbot run --json` writes one JSON document on stdout and nothing else, even while the
Temporal core logs: its log lines go through Python logging (bot.composition.temporal_runtime),
to stderr.

The core's TMPRL1104 warning ("workflow task duration exceeded") fires for every workflow task
longer than TEMPORAL_WORKFLOW_TASK_DURATION_WARN_SECONDS (5 s unless set; the core reads it
itself). Set to 0, every workflow task of the run logs it, so the core is certain to log here.
With the SDK's default runtime those lines were printed in colour on stdout, around the report.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.agent_repo import TINY_CATALOG, tiny_agent_repo
from tests.support.cli import evalbot

EVERY_TASK_WARNS = {"TEMPORAL_WORKFLOW_TASK_DURATION_WARN_SECONDS": "0"}


def test_run_json_stdout_is_one_document_while_the_core_logs(tmp_path: Path) -> None:
    repo = tiny_agent_repo(tmp_path / "agent")
    ran = evalbot(
        tmp_path / "state", TINY_CATALOG,
        "run", "--repo", str(repo.path), "--dataset", "tiny", "--base", repo.base,
        "--head", repo.head, "--trials", "1", "--cases", "supply-governing-law", "--json",
        env=EVERY_TASK_WARNS,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "TMPRL1104" not in ran.stdout, ran.stdout[:1000]
    report = json.loads(ran.stdout)  # the whole of stdout: one document, nothing around it
    assert report["progress"]["cells_done"] == 2
    warnings = [line for line in ran.stderr.splitlines() if "TMPRL1104" in line]
    assert warnings  # the core did log, and its lines went to stderr
    assert "\x1b[" not in ran.stderr  # through Python logging, not the core's coloured console
    # a run workflow's task spans its local activities by design (docs/engine.md): not warned;
    # the experiment's own long tasks would be a stall: still warned
    assert all("'workflow_type': 'ExperimentWorkflow'" in line for line in warnings)
