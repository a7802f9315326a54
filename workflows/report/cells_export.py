"""An experiment's results as rows: one per run × criterion (docs/cli.md, "Cell export").

Each row carries the run's identity, its outcome (`status`) and whether it counts under the
outcome policy (workflows/outcomes.py: scored runs and the agent's failures count; runs lost to
infrastructure do not), the criterion's score, and the run's cost, tokens and wall time (repeated
on each of the run's rows). A run that recorded no criteria (lost before grading) has one row with
an empty `criterion`. One result per cell, the latest, as in the report.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any, Literal

from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import counted
from workflows.records import CriterionScore, RunResult
from workflows.report.table import cells_in_order

Format = Literal["csv", "jsonl", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "parquet")
COLUMNS = (
    "experiment",
    "arm",
    "case",
    "trial",
    "run_id",
    "status",
    "counted",
    "criterion",
    "score",
    "cost_usd",
    "sandbox_cost_usd",
    "input_tokens",
    "output_tokens",
    "wall_s",
    "judge_model",
)
MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}


class ExportError(RuntimeError):
    """The export cannot be written as asked; `str()` says what to do instead."""


def cell_rows(spec: ExperimentSpec, runs: Iterable[RunResult]) -> list[dict[str, Any]]:
    """The rows, in the experiment's cell order and each run's criterion order."""
    rows: list[dict[str, Any]] = []
    for run in cells_in_order(spec, runs):
        criteria: list[CriterionScore | None] = list(run.criteria) or [None]
        rows.extend(_row(spec.experiment_id, run, criterion) for criterion in criteria)
    return rows


def _row(experiment: str, run: RunResult, criterion: CriterionScore | None) -> dict[str, Any]:
    judge = criterion.judge if criterion is not None else None
    return {
        "experiment": experiment,
        "arm": run.arm,
        "case": run.case_id,
        "trial": run.trial,
        "run_id": run.run_id,
        "status": run.status.value,
        "counted": counted(run) is not None,
        "criterion": criterion.name if criterion is not None else "",
        "score": criterion.score if criterion is not None else None,
        "cost_usd": run.usage.cost_usd,
        "sandbox_cost_usd": run.sandbox.cost_usd,
        "input_tokens": run.usage.input_tokens,
        "output_tokens": run.usage.output_tokens,
        "wall_s": run.wall_s,
        "judge_model": judge.model if judge is not None else "",
    }


def export_cells(rows: list[dict[str, Any]], fmt: Format) -> bytes:
    """The rows in `fmt`. CSV: a header, `counted` as true/false, an empty cell for no score."""
    if fmt == "csv":
        return to_csv(rows).encode()
    if fmt == "jsonl":
        return "".join(json.dumps(row) + "\n" for row in rows).encode()
    return to_parquet(rows)


def to_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, "counted": "true" if row["counted"] else "false"})
    return out.getvalue()


def to_parquet(rows: list[dict[str, Any]]) -> bytes:
    """Parquet through pyarrow, an optional dependency (`pip install 'evalbot[parquet]'`)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "parquet needs pyarrow, which is not installed: pip install 'evalbot[parquet]', "
            "or use --format csv or jsonl"
        ) from None
    table = pa.Table.from_pylist(rows, schema=_schema(pa))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _schema(pa: Any) -> Any:
    types = {
        "trial": pa.int64(),
        "counted": pa.bool_(),
        "score": pa.float64(),
        "cost_usd": pa.float64(),
        "sandbox_cost_usd": pa.float64(),
        "input_tokens": pa.int64(),
        "output_tokens": pa.int64(),
        "wall_s": pa.float64(),
    }
    return pa.schema([(name, types.get(name, pa.string())) for name in COLUMNS])
