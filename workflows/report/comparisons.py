"""One arm against the baseline: a row per criterion (Holm-corrected), one for overall, and one
for the agent's failure rate (its own paired test; higher is worse)."""

from __future__ import annotations

from dataclasses import replace

from workflows.report.report_models import ComparisonRow
from workflows.report.table import FAILURE_RATE, OVERALL, OVERALL_KEY, Table, judged
from workflows.stats import (
    PairedComparison,
    Verdict,
    holm_verdicts,
    is_binary,
    paired_comparison,
    trial_disagreement,
)
from workflows.stats.bootstrap import RESAMPLES


def comparison_rows(table: Table, criteria: list[str], base: str, head: str) -> list[ComparisonRow]:
    """The overall row keeps its own uncorrected verdict; criteria rows are Holm-corrected."""
    names = [OVERALL_KEY, *criteria]
    scores = table.scores
    compared = {
        c: paired_comparison(scores[base][c], scores[head][c], bootstrap=RESAMPLES) for c in names
    }
    tested = {c: r for c, r in compared.items() if judged(table, c, base, head)}
    adjusted = holm_verdicts({c: r for c, r in tested.items() if c != OVERALL_KEY})
    rows = []
    for name, result in compared.items():
        if name not in tested:  # nothing to pair, so nothing was dropped either
            row = _row(name, replace(result, dropped=()), verdict=Verdict.NOT_JUDGED)
        elif name == OVERALL_KEY:
            row = _row(name, result, verdict=result.verdict)
        else:
            p_adjusted, verdict = adjusted[name]
            row = _row(name, result, verdict=verdict, p_adjusted=p_adjusted)
        rows.append(_with_noise(row, table, name, base, head))
    return rows


def failure_rate_row(table: Table, base: str, head: str) -> ComparisonRow | None:
    """The share of counted runs the agent failed, per arm, paired by case: a rise is a
    regression even when the scores are close. None while neither arm has a failed run."""
    base_failures, head_failures = table.failures[base], table.failures[head]
    if not any(any(values) for values in (*base_failures.values(), *head_failures.values())):
        return None
    result = paired_comparison(base_failures, head_failures, bootstrap=RESAMPLES)
    row = _row(FAILURE_RATE, result, verdict=_worse_is_higher(result.verdict))
    # flips and the pass threshold speak of scores, not of failure indicators
    update = {"failure_rate": True, "binary": True, "pass_to_fail": [], "fail_to_pass": []}
    return row.model_copy(update=update)


def _worse_is_higher(verdict: Verdict) -> Verdict:
    flipped = {Verdict.IMPROVED: Verdict.REGRESSED, Verdict.REGRESSED: Verdict.IMPROVED}
    return flipped.get(verdict, verdict)


def _row(
    name: str, result: PairedComparison, *, verdict: Verdict, p_adjusted: float | None = None
) -> ComparisonRow:
    return ComparisonRow(
        criterion=OVERALL if name == OVERALL_KEY else name,
        overall=name == OVERALL_KEY,
        base_mean=result.base_mean,
        head_mean=result.head_mean,
        delta=result.delta,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        p_value=result.p_value,
        p_adjusted=p_adjusted,
        verdict=verdict,
        mde=result.mde,
        n_cases=result.n,
        dropped_cases=list(result.dropped),
        pending_cases=list(result.pending),
        boot_low=result.boot_low,
        boot_high=result.boot_high,
        intervals_disagree=result.intervals_disagree,
        pass_to_fail=list(result.pass_to_fail),
        fail_to_pass=list(result.fail_to_pass),
        method=result.method,
        cases_needed=result.cases_needed,
    )


def _with_noise(row: ComparisonRow, table: Table, name: str, base: str, head: str) -> ComparisonRow:
    base_scores, head_scores = table.scores[base][name], table.scores[head][name]
    both = {"all": [v for values in (*base_scores.values(), *head_scores.values()) for v in values]}
    return row.model_copy(
        update={
            "base_disagreement": trial_disagreement(base_scores),
            "head_disagreement": trial_disagreement(head_scores),
            "binary": name != OVERALL_KEY and is_binary(both),
        }
    )
