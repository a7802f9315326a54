"""The report as GitHub-flavoured Markdown: one template for the CLI and the sticky PR comment.

Escaping is by construction: every `{{ value }}` in the template goes through `escape_text`
unless a formatting filter here produced it (those return `Markup`). Agent-controlled strings
(case ids, rationales, error messages, refs) therefore cannot break a table, inject HTML or
Markdown, or mention people.

Size is bounded by construction: every list is capped (cases, errors, moved cases), every
free-text field is cut to a fixed length, so the comment grows only with the number of criteria
and arms. When even that is too long, `render_markdown` renders again with less detail — lists
first, then the per-criterion details, the pass@k and cost tables, then rows without a detected
change — and never drops a changed verdict. Only a report with thousands of changed criteria is
cut at a line, with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from bot.render import formats
from bot.render.escape import code, escape_text, safe_url, trusted
from bot.render.view import Detail, report_view
from workflows.report import ExperimentReport

MAX_CHARS = 65_536  # GitHub's limit for a comment body
COMMENT_RESERVE = 1_024  # room for the sticky comment's hidden markers around the report
LIMIT = MAX_CHARS - COMMENT_RESERVE
TEMPLATE = "report.md.j2"

DETAIL_LEVELS = (
    Detail(),
    Detail(max_errors=10, max_cases=5, max_moves=5),
    Detail(max_errors=5, max_cases=3, max_moves=3, criterion_details=False, pass_k=False),
    Detail(
        max_errors=0, max_cases=0, max_moves=0, criterion_details=False, pass_k=False, costs=False
    ),
    Detail(
        max_errors=0,
        max_cases=0,
        max_moves=0,
        criterion_details=False,
        pass_k=False,
        costs=False,
        unchanged_rows=False,
    ),
)


def _final(function: Callable[..., str]) -> Callable[..., Markup]:
    """A number format as a filter whose output is final (built only from numbers and labels)."""

    def wrapped(*args: Any) -> Markup:
        return trusted(function(*args))

    return wrapped


def _cases(names: Sequence[str], limit: int) -> Markup:
    """At most `limit` case names, escaped, then how many more; just the count at limit 0."""
    if limit <= 0:
        return trusted(f"{len(names)} {'case' if len(names) == 1 else 'cases'}")
    shown = ", ".join(escape_text(n, 80) for n in names[:limit])
    if len(names) > limit:
        shown += f" … and {len(names) - limit} more"
    return trusted(shown)


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
        code=code,
        cases=_cases,
        **formats.filters(_final),
    )
    return env


def render_markdown(
    report: ExperimentReport, *, details_url: str | None = None, limit: int = LIMIT
) -> str:
    """The report as GitHub-flavoured Markdown, always shorter than `limit` characters."""
    url = trusted(safe_url(details_url)) if details_url else None
    template = environment().get_template(TEMPLATE)
    view = report_view(report)
    text = ""
    for detail in DETAIL_LEVELS:
        text = template.render(report=report, detail=detail, details_url=url, view=view)
        if len(text) < limit:
            return text
    return _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    """Last resort for absurdly many changed criteria: cut at a line, say so."""
    note = "\n\n…truncated to fit a GitHub comment; see the full report.\n"
    head = text[: limit - len(note) - 1]
    return head[: head.rfind("\n")] + note
