"""The cell export (workflows/report/cells_export.py): one row per run × criterion, `counted` as
the outcome policy says, the latest result per cell, and each format read back."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import JudgeRecord, RunStatus
from workflows.report.cells_export import COLUMNS, ExportError, cell_rows, export_cells

SPEC = make_spec(n_cases=2, trials=1, arms=("main", "pr"))


def runs() -> list:
    judged = scored_run(SPEC, 0, "pr", 0, {"accuracy": 0.5, "tone": 1.0}, cost=0.25, wall=3.5)
    tone = judged.criteria[1].model_copy(update={"judge": JudgeRecord(model="gpt-4o-mini")})
    judged = judged.model_copy(update={"criteria": (judged.criteria[0], tone)})
    stale = scored_run(SPEC, 0, "main", 0, {"accuracy": 0.0})
    return [
        stale,
        scored_run(SPEC, 0, "main", 0, {"accuracy": 1.0}),  # the rerun: it replaces `stale`
        judged,
        errored_run(SPEC, 1, "main", 0, RunStatus.SANDBOX_ERROR, "sandbox died"),
        errored_run(SPEC, 1, "pr", 0, RunStatus.TIMEOUT, "timed out"),
    ]


def test_one_row_per_run_and_criterion_with_the_outcome_policy() -> None:
    rows = cell_rows(SPEC, runs())
    picked = [(r["case"], r["arm"], r["criterion"], r["score"], r["counted"]) for r in rows]
    assert picked == [
        ("case-00", "main", "accuracy", 1.0, True),
        ("case-00", "pr", "accuracy", 0.5, True),
        ("case-00", "pr", "tone", 1.0, True),
        ("case-01", "main", "", None, False),  # infrastructure: one row, not counted
        ("case-01", "pr", "", None, True),  # the agent's failure counts
    ]
    judged = rows[2]
    assert judged["judge_model"] == "gpt-4o-mini" and rows[1]["judge_model"] == ""
    assert (judged["cost_usd"], judged["input_tokens"], judged["output_tokens"]) == (
        0.25,
        1000,
        200,
    )
    assert judged["wall_s"] == 3.5 and judged["run_id"] == "exp-1/case-00/pr/0"
    assert rows[3]["status"] == "sandbox_error" and rows[4]["status"] == "timeout"
    assert all(list(row) == list(COLUMNS) for row in rows)


def test_csv_and_jsonl_read_back_to_the_rows() -> None:
    rows = cell_rows(SPEC, runs())
    table = list(csv.DictReader(io.StringIO(export_cells(rows, "csv").decode())))
    assert [list(r) for r in table[:1]] == [list(COLUMNS)]
    assert [r["counted"] for r in table] == ["true", "true", "true", "false", "true"]
    assert [r["score"] for r in table] == ["1.0", "0.5", "1.0", "", ""]
    lines = export_cells(rows, "jsonl").decode().splitlines()
    assert [json.loads(line) for line in lines] == rows


def test_parquet_reads_back_to_the_rows() -> None:
    import pyarrow.parquet as pq  # a dev dependency (the `parquet` extra for users)

    data = export_cells(cell_rows(SPEC, runs()), "parquet")
    assert pq.read_table(io.BytesIO(data)).to_pylist() == cell_rows(SPEC, runs())


def test_parquet_without_pyarrow_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ExportError, match=r"pip install 'evalbot\[parquet\]'"):
        export_cells(cell_rows(SPEC, runs()), "parquet")
