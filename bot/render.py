"""Render an ExperimentReport as Markdown: one template for the CLI and the GitHub sticky comment.

Escaping is by construction: every `{{ value }}` in the template goes through `escape_text`
unless a formatting filter here produced it (those return `Markup`). Agent-controlled strings (case
ids, error messages, refs) therefore cannot break the table, inject HTML or Markdown, or mention
people. The output stays under GitHub's 65,536-character comment limit: lists are cut first, then
optional sections, then unchanged rows — changed verdicts are never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from workflows.report import ArmComparison, ComparisonRow, ExperimentReport
from workflows.stats import Verdict

MAX_CHARS = 65_536
TEMPLATE = "report.md.j2"

VERDICT_LABELS = {
    Verdict.IMPROVED: "🟢 improved",
    Verdict.REGRESSED: "🔴 regressed",
    Verdict.NO_CHANGE: "⚪ no detectable change",
    Verdict.NOT_ENOUGH: "⚠️ not enough cases",
    Verdict.NOT_JUDGED: "➖ not judged",
}

_ZWSP = "&#8203;"  # breaks @mentions and #references without changing what a reader sees
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "@": "@" + _ZWSP,
        "#": "#" + _ZWSP,
        **{c: "\\" + c for c in "\\`*_[]|~!"},
    }
)


def _trusted(text: str) -> Markup:
    """Text this module produced itself (numbers, fixed labels, escaped text): not re-escaped."""
    return Markup(text)  # noqa: S704 - the one place output is marked final; see callers


def escape_text(value: object, limit: int = 300) -> Markup:
    """Untrusted text as inert inline Markdown: one line, at most `limit` characters before
    escaping, no HTML, no emphasis/links/code, table-safe pipes, no @mentions or #references."""
    text = _CONTROL.sub(" ", str(value))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _trusted(text.translate(_ESCAPES))


def safe_url(url: str) -> str:
    """An http(s) URL fit for a Markdown link target; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"details URL must be http(s), got {url[:100]!r}")
    return quote(url, safe=":/?#[]@!$&'*+,;=%~")


def _score(value: float | None) -> Markup:
    return _trusted("—" if value is None else f"{value:.2f}")


def _signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def _delta(row: ComparisonRow) -> Markup:
    if row.delta is None:
        return _trusted("—")
    if row.ci_low is None or row.ci_high is None:
        return _trusted(_signed(row.delta))
    return _trusted(f"{_signed(row.delta)} [{_signed(row.ci_low)}, {_signed(row.ci_high)}]")


def _verdict(row: ComparisonRow) -> Markup:
    label = VERDICT_LABELS[row.verdict]
    if row.verdict is Verdict.NO_CHANGE and row.mde is not None:
        label += f" (MDE ±{row.mde:.2f})"
    return _trusted(label)


def _usd(value: float | None) -> Markup:
    if value is None:
        return _trusted("—")
    return _trusted(f"${value:,.4f}" if 0 < value < 0.01 else f"${value:,.2f}")


def _tokens(value: int) -> Markup:
    if value >= 1_000_000:
        return _trusted(f"{value / 1_000_000:.1f}M")
    return _trusted(f"{value / 1000:.1f}k" if value >= 1000 else str(value))


def _seconds(value: float | None) -> Markup:
    return _trusted("—" if value is None else f"{value:,.1f} s")


def _percent(value: float) -> Markup:
    return _trusted(f"{100 * value:.0f}%")


def _finalize(value: object) -> object:
    return value if isinstance(value, Markup) else escape_text(value)


def environment() -> Environment:
    """The Jinja2 environment: templates from bot/templates, escape-by-default finalize."""
    env = Environment(  # noqa: S701 - output is Markdown; _finalize escapes every value
        loader=PackageLoader("bot", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(
        md=escape_text,
        score=_score,
        delta=_delta,
        verdict=_verdict,
        usd=_usd,
        tokens=_tokens,
        seconds=_seconds,
        percent=_percent,
    )
    return env


@dataclass(frozen=True)
class Detail:
    """How much of the optional material to show; reduced until the comment fits."""

    max_errors: int = 30
    max_dropped: int = 10
    pass_k: bool = True
    costs: bool = True
    unchanged_rows: bool = True


DETAIL_LEVELS = (
    Detail(),
    Detail(max_errors=10, max_dropped=3, pass_k=False),
    Detail(max_errors=0, max_dropped=0, pass_k=False, costs=False),
    Detail(max_errors=0, max_dropped=0, pass_k=False, costs=False, unchanged_rows=False),
)


def render_markdown(report: ExperimentReport, *, details_url: str | None = None) -> str:
    """The report as GitHub-flavoured Markdown, always shorter than MAX_CHARS characters."""
    url = _trusted(safe_url(details_url)) if details_url else None
    template = environment().get_template(TEMPLATE)
    text = ""
    for detail in DETAIL_LEVELS:
        text = template.render(report=report, detail=detail, details_url=url, view=_view(report))
        if len(text) < MAX_CHARS:
            return text
    return _cut(text)


def _view(report: ExperimentReport) -> dict[str, Any]:
    """Derived values the template needs, computed here rather than in Jinja."""
    return {
        "headline": [_headline(c) for c in report.comparisons],
        "infra_errors": sum(1 for e in report.errors if e.infra),
        "pass_k": any(s.pass_k for s in report.summaries),
    }


def _headline(comparison: ArmComparison) -> dict[str, Any]:
    overall = comparison.rows[0]
    changed = [r for r in comparison.rows[1:] if r.verdict.is_change]
    return {"comparison": comparison, "overall": overall, "changed": len(changed)}


def _cut(text: str) -> str:
    """Last resort for absurdly many changed criteria: cut at a line, say so."""
    note = "\n\n…truncated to fit a GitHub comment; see the full report.\n"
    head = text[: MAX_CHARS - len(note) - 1]
    return head[: head.rfind("\n")] + note
