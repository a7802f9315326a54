"""Dashboard pages rendered on the server with jinja2 (bot/dashboard/templates/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from bot.render.html import compile_report_template

TEMPLATES = Path(__file__).parent / "templates"
_ENVIRONMENT = Environment(
    loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """The template `name` rendered with `context`."""
    return HTMLResponse(_ENVIRONMENT.get_template(name).render(**context), status_code=status)


def compile_templates() -> None:
    """Compile every dashboard template and the report's once, when the app is made, so that no
    visitor's first page pays for it (benchmarks/viewer.py, "first load")."""
    for template in sorted(TEMPLATES.glob("*.j2")):
        _ENVIRONMENT.get_template(template.name)
    compile_report_template()
