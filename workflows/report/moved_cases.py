"""The cases that moved most between two arms, each with a one-line reason."""

from __future__ import annotations

from workflows.report.report_models import CaseMove
from workflows.report.table import OVERALL_KEY, Table
from workflows.stats import case_means

TOP_CASES = 5


def moved_cases(
    table: Table, criteria: list[str], base: str, head: str, *, top: int = TOP_CASES
) -> tuple[list[CaseMove], list[CaseMove]]:
    """(most regressed, most improved) cases by overall per-case mean, at most `top` each."""
    before = case_means(table.scores[base][OVERALL_KEY])
    after = case_means(table.scores[head][OVERALL_KEY])
    deltas = sorted(
        ((after[c] - before[c], c) for c in after if c in before), key=lambda x: (x[0], x[1])
    )
    regressed = [_move(table, criteria, base, head, c) for d, c in deltas[:top] if d < 0]
    improving = sorted(((d, c) for d, c in deltas if d > 0), key=lambda x: (-x[0], x[1]))[:top]
    improved = [_move(table, criteria, base, head, c) for _, c in improving]
    return regressed, improved


def _move(table: Table, criteria: list[str], base: str, head: str, case: str) -> CaseMove:
    before = case_means(table.scores[base][OVERALL_KEY])[case]
    after = case_means(table.scores[head][OVERALL_KEY])[case]
    delta = after - before
    criterion = _biggest_mover(table, criteria, base, head, case, sign=1 if delta > 0 else -1)
    failing_arm = head if delta < 0 else base  # explain the failure: where the score was low
    reason = table.lowest(failing_arm, case, criterion) if criterion else ""
    return CaseMove(
        case_id=case,
        base=before,
        head=after,
        delta=delta,
        criterion=criterion,
        reason=reason,
        reason_arm=failing_arm if criterion else "",
    )


def _biggest_mover(
    table: Table, criteria: list[str], base: str, head: str, case: str, *, sign: int
) -> str | None:
    """The criterion whose per-case mean moved most in the direction `sign` (None if none)."""
    best: tuple[float, str] | None = None
    for name in criteria:
        b = case_means({case: table.scores[base][name].get(case, [])}).get(case)
        h = case_means({case: table.scores[head][name].get(case, [])}).get(case)
        if b is None or h is None or sign * (h - b) <= 0:
            continue
        if best is None or sign * (h - b) > best[0]:
            best = (sign * (h - b), name)
    return best[1] if best else None
