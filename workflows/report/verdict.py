"""The verdict of one comparison, in one sentence (docs/statistics.md, "The comparison's verdict").

In order: too many cells lost to infrastructure → incomplete; too few paired cases → too few
cases; the agent's failure rate rose → regressed; otherwise the overall score's verdict. The
criteria rows keep their own (Holm-corrected) verdicts beside it.
"""

from __future__ import annotations

from workflows.report.report_models import ComparisonRow, LostCells
from workflows.stats import Verdict


def comparison_verdict(
    rows: list[ComparisonRow], failure_rate: ComparisonRow | None, loss: LostCells
) -> tuple[Verdict, str]:
    """`rows`: overall first, then the criteria."""
    overall = rows[0]
    if loss.incomplete:
        lost = loss.base_lost + loss.head_lost
        return Verdict.INCOMPLETE, (
            f"incomplete — {lost} {_cells(lost)} lost to infrastructure "
            f"({loss.base_lost} of {loss.base_cells} in the base arm, "
            f"{loss.head_lost} of {loss.head_cells} in the head arm)"
        )
    if overall.verdict is Verdict.TOO_FEW:
        return Verdict.TOO_FEW, _too_few(overall)
    if failure_rate is not None and failure_rate.verdict is Verdict.REGRESSED:
        return Verdict.REGRESSED, (
            f"the agent failed more often: {_percent(failure_rate.base_mean)} → "
            f"{_percent(failure_rate.head_mean)} of runs"
        )
    return overall.verdict, _score_reason(overall) + _criteria_moved(rows[1:])


def _criteria_moved(criteria: list[ComparisonRow]) -> str:
    """ "; privilege regressed, completeness improved": what the criteria rows say beside it."""
    moved = [f"{row.criterion} {row.verdict.value}" for row in criteria if row.verdict.is_change]
    return "; " + ", ".join(moved) if moved else ""


def _too_few(overall: ComparisonRow) -> str:
    sentence = f"too few cases — {overall.n_cases} paired"
    if overall.cases_needed is not None:
        return f"{sentence}; about {overall.cases_needed} would detect a change of this size"
    return sentence


def _score_reason(overall: ComparisonRow) -> str:
    if overall.verdict is Verdict.NOT_JUDGED or overall.delta is None:
        return "nothing was judged"
    verdict = overall.verdict.value
    if overall.verdict is Verdict.NO_CHANGE and overall.mde is not None:
        return f"{verdict} in the overall score (could detect ±{overall.mde:.2f})"
    return f"{verdict}: overall score {overall.delta:+.2f}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _cells(count: int) -> str:
    return "cell" if count == 1 else "cells"
