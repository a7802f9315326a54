"""The multiple-comparison correction across criteria: Holm–Bonferroni (docs/statistics.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workflows.stats.paired import ALPHA, PairedComparison, Verdict, verdict_for

# Rows that cannot be flagged, whatever their p-value: they keep their verdict and stay out of
# the Holm family (a row that can never be flagged can never be a false positive).
UNTESTED = frozenset({Verdict.TOO_FEW, Verdict.INCOMPLETE, Verdict.NOT_JUDGED})


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_verdicts(
    comparisons: Mapping[str, PairedComparison], *, alpha: float = ALPHA
) -> dict[str, tuple[float | None, Verdict]]:
    """Per name, (Holm-adjusted p, verdict) across the comparisons that have a p-value.

    A comparison whose own verdict is TOO_FEW, INCOMPLETE or NOT_JUDGED keeps it, with no
    adjusted p, and is not part of the family."""
    tested = [
        name
        for name, c in comparisons.items()
        if c.p_value is not None and c.verdict not in UNTESTED
    ]
    adjusted = dict(zip(tested, holm([comparisons[n].p_value or 0.0 for n in tested]), strict=True))
    result: dict[str, tuple[float | None, Verdict]] = {}
    for name, comparison in comparisons.items():
        if comparison.verdict in UNTESTED:
            result[name] = (None, comparison.verdict)
            continue
        p_adj = adjusted.get(name)
        result[name] = (p_adj, verdict_for(comparison.delta, p_adj, alpha))
    return result
