"""The report as JSON: the report model, as `evalbot results --json` prints it."""

from __future__ import annotations

import json

from workflows.report import ExperimentReport


def render_json(report: ExperimentReport, *, indent: int | None = 2) -> str:
    return json.dumps(report.model_dump(mode="json"), indent=indent, ensure_ascii=False)
