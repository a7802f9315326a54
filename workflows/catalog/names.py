"""The one check for names that come from outside: datasets, worlds, cases, arms, labels.

A catalog name is a folder name inside the catalog and a piece of every experiment id, never a
path: lowercase ASCII letters and digits plus '.', '_' and '-', starting with a letter or digit, at
most MAX_NAME_LENGTH characters. So '../..', '/', NUL, whitespace, look-alike letters (Cyrillic
'а', fullwidth 'ａ'), bidirectional overrides and 10 KB names are all refused before anything is
joined into a path. Every boundary (the `/eval` comment, `eval:<name>` labels, the CLI, the
dashboard, catalog files) applies it; docs/github-bot.md ("Names") lists them.
"""

from __future__ import annotations

import re

from workflows.catalog.models import MAX_NAME_LENGTH, NAME_PATTERN

NAME_RULE = (
    "lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, "
    f"at most {MAX_NAME_LENGTH} characters"
)
_NAME = re.compile(NAME_PATTERN)
_SHOWN = 40  # characters of a refused name quoted back


class InvalidNameError(ValueError):
    """A name that breaks the rule; `str()` is one sentence naming the rule."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} name {shown(name)} is not allowed: names are {NAME_RULE}")


def is_name(name: str) -> bool:
    """True for a valid catalog name (see the module doc)."""
    return len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None


def check_name(kind: str, name: str) -> str:
    """`name` if valid, else InvalidNameError naming `kind` ('dataset', 'case', 'arm', ...)."""
    if not is_name(name):
        raise InvalidNameError(kind, name)
    return name


def shown(name: str) -> str:
    """A refused name quoted safely: escaped to ASCII (NUL, RTL override and look-alikes become
    visible `\\x00`, `\\u202e`, `\\u0430`), cut to a few dozen characters with its length."""
    quoted = ascii(name[:_SHOWN])
    if len(name) > _SHOWN:
        quoted += f"... ({len(name)} characters)"
    return quoted
