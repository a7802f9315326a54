"""Escaping for agent-controlled text in Markdown: one line, inert, table-safe."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from markupsafe import Markup

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
_CODE_SAFE = re.compile(r"^[A-Za-z0-9._/:= -]+$")


def trusted(text: str) -> Markup:
    """Text this package produced itself (numbers, fixed labels, escaped text): not re-escaped."""
    return Markup(text)  # noqa: S704 - the one place output is marked final; see callers


def escape_text(value: object, limit: int = 300) -> Markup:
    """Untrusted text as inert inline Markdown: one line, at most `limit` characters before
    escaping, no HTML, no emphasis/links/code, table-safe pipes, no @mentions or #references."""
    text = _CONTROL.sub(" ", str(value))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return trusted(text.translate(_ESCAPES))


def code(value: object) -> Markup:
    """A command as an inline code span when it holds only plain characters, else escaped text
    (a code span cannot escape a backtick or a table pipe)."""
    text = str(value)
    if _CODE_SAFE.match(text) and len(text) <= 200:
        return trusted(f"`{text}`")
    return escape_text(text, 200)


def safe_url(url: str) -> str:
    """An http(s) URL fit for a Markdown link target; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"details URL must be http(s), got {url[:100]!r}")
    return quote(url, safe=":/?#[]@!$&'*+,;=%~")
