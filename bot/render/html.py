"""The report as a standalone HTML page (jinja2 with autoescaping): the same data as the comment,
with every list in full, for the dashboard."""

from __future__ import annotations

import functools

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from bot.render import formats
from bot.render.escape import safe_url
from bot.render.view import FULL, report_view
from workflows.report import ExperimentReport

TEMPLATE = "report.html.j2"


@functools.cache
def html_environment() -> Environment:
    """The report's jinja2 environment, built once per process: it keeps the compiled template,
    which takes longer to compile than a large report takes to render (docs/dashboard.md)."""
    env = Environment(
        loader=PackageLoader("bot", "templates"),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html", "html.j2"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(formats.filters())
    return env


def compile_report_template() -> None:
    html_environment().get_template(TEMPLATE)


def render_html(report: ExperimentReport, *, details_url: str | None = None) -> str:
    """A full HTML document; every value is escaped by jinja2's autoescape."""
    url = safe_url(details_url) if details_url else None
    template = html_environment().get_template(TEMPLATE)
    return template.render(report=report, detail=FULL, details_url=url, view=report_view(report))
