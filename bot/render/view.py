"""Derived values the templates need, computed here rather than in Jinja."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from workflows.report import ArmComparison, ComparisonRow, ExperimentReport, ResourceChange


@dataclass(frozen=True)
class Detail:
    """How much of the optional material to show; reduced until the comment fits."""

    max_errors: int = 30
    max_cases: int = 10  # names listed per list of cases (dropped, flipped)
    max_moves: int = 5  # top regressed / improved cases
    criterion_details: bool = True
    pass_k: bool = True
    costs: bool = True
    unchanged_rows: bool = True
    max_config: int = 10  # config pairs shown per arm


FULL = Detail(max_errors=10**9, max_cases=10**9, max_moves=10**9)


def report_view(report: ExperimentReport) -> dict[str, Any]:
    return {
        "comparisons": [comparison_view(c) for c in report.comparisons],
        "changes": arm_changes(report),
        "infra_errors": sum(1 for e in report.errors if e.infra),
        "agent_failures": sum(1 for e in report.errors if not e.infra),
        "build_logs": {b.arm: _last_lines(b.log_tail) for b in report.build_failures},
        "pass_k": pass_k_table(report),
        "judge": any(s.judge.criteria_judged for s in report.summaries),
        "arm_configs": len(report.arms) > 2 or any(a.config for a in report.arms),
        "frontier": len(report.frontier) > 2,
    }


BUILD_LOG_LINES = 10


def _last_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][-BUILD_LOG_LINES:]


def comparison_view(comparison: ArmComparison) -> dict[str, Any]:
    criteria = comparison.rows[1:]
    return {
        "comparison": comparison,
        "overall": comparison.rows[0],
        "criteria": criteria,
        "table_rows": _table_rows(comparison),
        "changed": sum(1 for r in criteria if r.verdict.is_change),
        "aa": aa_view(comparison) if comparison.aa else None,
    }


def _table_rows(comparison: ArmComparison) -> list[ComparisonRow]:
    """overall, the failure rate (when any run was counted), then the criteria."""
    extra = [comparison.failure_rate] if comparison.failure_rate is not None else []
    return [comparison.rows[0], *extra, *comparison.rows[1:]]


def aa_view(comparison: ArmComparison) -> dict[str, Any]:
    """How often criteria flip with no code change."""
    criteria = [r for r in comparison.rows[1:] if r.n_cases]
    rates = [(r.flips / r.n_cases, r.criterion) for r in criteria]
    disagreement = [
        value
        for r in criteria
        for value in (r.base_disagreement, r.head_disagreement)
        if value is not None
    ]
    return {
        "flagged": [r.criterion for r in comparison.rows[1:] if r.verdict.is_change],
        "median_flip_rate": statistics.median(r for r, _ in rates) if rates else None,
        "max_flip": max(rates) if rates else None,
        "disagreement": statistics.mean(disagreement) if disagreement else None,
    }


def arm_changes(report: ExperimentReport) -> dict[str, dict[str, ResourceChange]]:
    """Per head arm, its resource changes against the baseline, by metric."""
    return {c.head: {r.metric: r for r in c.resources} for c in report.comparisons}


def listed(row: ComparisonRow) -> bool:
    """Rows the comment must always show: overall and every changed verdict."""
    return row.overall or row.verdict.is_change


def pass_k_table(report: ExperimentReport) -> dict[str, Any] | None:
    """pass@k rows pivoted to one line per criterion: columns (k, measure, arm)."""
    cells: dict[str, dict[tuple[int, str, str], float]] = {}
    for summary in report.summaries:
        for row in summary.pass_k:
            line = cells.setdefault(row.criterion, {})
            line[(row.k, "pass@", summary.arm)] = row.pass_at_k
            if row.k > 1:
                line[(row.k, "pass^", summary.arm)] = row.pass_hat_k
    if not cells:
        return None
    columns = sorted({key for line in cells.values() for key in line}, key=_column_order(report))
    return {"columns": columns, "rows": cells}


def _column_order(report: ExperimentReport) -> Any:
    arms = [a.name for a in report.arms]
    return lambda key: (key[0], key[1] != "pass@", arms.index(key[2]))
