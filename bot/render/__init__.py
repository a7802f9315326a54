"""Render an ExperimentReport: Markdown (CLI and the GitHub sticky comment), HTML and JSON.

render_markdown(report, details_url=None)   # < 65,536 characters, escaped by construction
render_html(report)                         # a standalone page, autoescaped
render_json(report)                         # the report model as JSON
"""

from bot.render.data import render_json
from bot.render.escape import code, escape_text, safe_url
from bot.render.formats import VERDICT_LABELS
from bot.render.html import render_html
from bot.render.markdown import DETAIL_LEVELS, LIMIT, MAX_CHARS, environment, render_markdown
from bot.render.view import Detail

__all__ = [
    "DETAIL_LEVELS",
    "LIMIT",
    "MAX_CHARS",
    "VERDICT_LABELS",
    "Detail",
    "code",
    "environment",
    "escape_text",
    "render_html",
    "render_json",
    "render_markdown",
    "safe_url",
]
