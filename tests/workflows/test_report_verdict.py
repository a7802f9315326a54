"""The comparison's verdict (workflows/report/verdict.py): incomplete, then too few cases, then a
rising failure rate, then the overall score — with the criteria that moved named beside it."""

from __future__ import annotations

from workflows.report.report_models import ComparisonRow, LostCells
from workflows.report.verdict import comparison_verdict
from workflows.stats import Verdict


def row(name: str, verdict: Verdict, **values: float | int | None) -> ComparisonRow:
    return ComparisonRow(criterion=name, overall=name == "overall", verdict=verdict, **values)


OVERALL_UP = row("overall", Verdict.IMPROVED, delta=0.2, n_cases=20)
FAILURES_UP = row("failure rate", Verdict.REGRESSED, base_mean=0.0, head_mean=0.6)
COMPLETE = LostCells(base_lost=0, base_cells=40, head_lost=0, head_cells=40)


def test_lost_cells_come_first_then_too_few_then_failures_then_the_score() -> None:
    lost = LostCells(base_lost=0, base_cells=40, head_lost=12, head_cells=40, incomplete=True)
    assert comparison_verdict([OVERALL_UP], FAILURES_UP, lost) == (
        Verdict.INCOMPLETE,
        "incomplete — 12 cells lost to infrastructure (0 of 40 in the base arm, 12 of 40 in the "
        "head arm)",
    )
    few = row("overall", Verdict.TOO_FEW, delta=0.2, n_cases=6, cases_needed=14)
    assert comparison_verdict([few], FAILURES_UP, COMPLETE)[0] is Verdict.TOO_FEW
    verdict, reason = comparison_verdict([OVERALL_UP], FAILURES_UP, COMPLETE)
    assert (verdict, reason) == (Verdict.REGRESSED, "the agent failed more often: 0% → 60% of runs")
    assert comparison_verdict([OVERALL_UP], None, COMPLETE)[0] is Verdict.IMPROVED


def test_the_criteria_that_moved_are_named_beside_the_overall_verdict() -> None:
    overall = row("overall", Verdict.NO_CHANGE, delta=0.01, n_cases=30, mde=0.16)
    rows = [
        overall,
        row("privilege", Verdict.REGRESSED),
        row("accuracy", Verdict.NO_CHANGE),
        row("completeness", Verdict.IMPROVED),
    ]
    verdict, reason = comparison_verdict(rows, None, COMPLETE)
    assert verdict is Verdict.NO_CHANGE
    assert reason == (
        "no detectable change in the overall score (could detect ±0.16); "
        "privilege regressed, completeness improved"
    )
