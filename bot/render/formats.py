"""Number formats shared by the Markdown and HTML reports. Each returns plain text built only
from numbers and fixed labels, so it is safe to mark final in either format."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workflows.report import ComparisonRow, FrontierPoint
from workflows.stats import Verdict

VERDICT_LABELS = {
    Verdict.IMPROVED: "🟢 improved",
    Verdict.REGRESSED: "🔴 regressed",
    Verdict.NO_CHANGE: "⚪ no detectable change",
    Verdict.TOO_FEW: "⚠️ too few cases",
    Verdict.INCOMPLETE: "🟡 incomplete",
    Verdict.NOT_JUDGED: "➖ not judged",
}


def score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "—"
    return f"[{signed(low)}, {signed(high)}]"


def delta(row: ComparisonRow) -> str:
    if row.delta is None:
        return "—"
    if row.ci_low is None or row.ci_high is None:
        return signed(row.delta)
    return f"{signed(row.delta)} {interval(row.ci_low, row.ci_high)}"


def verdict(row: ComparisonRow) -> str:
    label = VERDICT_LABELS[row.verdict]
    if row.verdict is Verdict.NO_CHANGE and row.mde is not None:
        label += f" (MDE ±{row.mde:.2f})"
    if row.verdict is Verdict.TOO_FEW and row.cases_needed is not None:
        label += f" (need ~{row.cases_needed})"
    return label


def verdict_label(value: Verdict) -> str:
    return VERDICT_LABELS[value]


def row_value(row: ComparisonRow, value: float | None) -> str:
    """A row's arm value: a share for the failure-rate row, a score otherwise."""
    return percent(value) if row.failure_rate else score(value)


def usd(value: float | None) -> str:
    if value is None:
        return "—"
    if 0 < value < 0.01:
        return f"${value:,.4f}"
    return f"${value:,.3f}" if value < 1 else f"${value:,.2f}"


def tokens(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} s"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def change(value: float | None) -> str:
    """A relative change as " (+12%)", or "" when there is none to show."""
    if value is None:
        return ""
    return f" ({100 * value:+.0f}%)".replace("-", "−")


def p_value(value: float | None) -> str:
    if value is None:
        return "—"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def unit(value: float | None, kind: str) -> str:
    return {"usd": usd, "tokens": tokens, "seconds": seconds}[kind](value)


def frontier_score(point: FrontierPoint) -> str:
    """The arm's score with its 95% interval: "0.52 [0.41, 0.63]"."""
    if point.score_low is None or point.score_high is None:
        return score(point.score)
    return f"{score(point.score)} [{score(point.score_low)}, {score(point.score_high)}]"


def frontier_cost(point: FrontierPoint) -> str:
    """The arm's cost per run with its 95% interval (a cost is never below 0)."""
    if point.cost_low is None or point.cost_high is None:
        return usd(point.cost_usd)
    return f"{usd(point.cost_usd)} [{usd(max(0.0, point.cost_low))}, {usd(point.cost_high)}]"


# The formats both templates use as filters, under their own names.
FILTERS: dict[str, Callable[..., str]] = {
    "score": score,
    "signed": signed,
    "interval": interval,
    "delta": delta,
    "verdict": verdict,
    "verdict_label": verdict_label,
    "row_value": row_value,
    "usd": usd,
    "tokens": tokens,
    "seconds": seconds,
    "percent": percent,
    "change": change,
    "p_value": p_value,
    "unit": unit,
    "frontier_score": frontier_score,
    "frontier_cost": frontier_cost,
}


def filters(wrap: Callable[[Callable[..., str]], Any] = lambda f: f) -> dict[str, Any]:
    """FILTERS, each passed through `wrap` (the Markdown environment marks their output final)."""
    return {name: wrap(function) for name, function in FILTERS.items()}
