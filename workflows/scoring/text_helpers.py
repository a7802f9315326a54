"""Text helpers shared by the graders: normalisation, number parsing, JSON paths, equality."""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

_WHITESPACE = re.compile(r"\s+")
NUMBER = re.compile(r"(?<![\w.])[-−]?[$€£]?\s?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")
_IGNORED_IN_NUMBERS = str.maketrans({",": None, "$": None, "€": None, "£": None, " ": None})


def normalise(text: str, *, case_sensitive: bool = False) -> str:
    """NFKC, whitespace runs collapsed to one space, casefolded unless `case_sensitive`."""
    collapsed = _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()
    return collapsed if case_sensitive else collapsed.casefold()


def occurring(values: list[str], text: str, *, case_sensitive: bool = False) -> list[str]:
    """The values (as given) that occur in `text` under `normalise`."""
    haystack = normalise(text, case_sensitive=case_sensitive)
    return [v for v in values if normalise(v, case_sensitive=case_sensitive) in haystack]


def parse_number(text: str) -> float | None:
    """A number written with optional sign, currency symbol and thousands commas; else None."""
    cleaned = text.strip().replace("−", "-").translate(_IGNORED_IN_NUMBERS)
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def first_number(text: str, start: int = 0) -> float | None:
    """The first number in `text` at or after `start` (a `-` glued to a word is a dash)."""
    match = NUMBER.search(text, start)
    return None if match is None else parse_number(match.group(0))


_MISSING = object()


def lookup(data: Any, path: str) -> tuple[bool, Any]:
    """Follow a dot path (`a.b.0.c`; integers index lists) -> (found, value)."""
    current = data
    for part in path.split("."):
        current = _step(current, part)
        if current is _MISSING:
            return False, None
    return True, current


def _step(current: Any, part: str) -> Any:
    if isinstance(current, dict):
        return current.get(part, _MISSING)
    if isinstance(current, list) and re.fullmatch(r"-?\d+", part):
        index = int(part)
        return current[index] if -len(current) <= index < len(current) else _MISSING
    return _MISSING


def loosely_equal(actual: Any, expected: Any) -> bool:
    """Equality for graders: strings case-insensitively (after `normalise`), numbers by value
    (1 == 1.0, close floats equal), booleans only to booleans, lists and tables element-wise."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, str) and isinstance(actual, str):
        return normalise(actual) == normalise(expected)
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        return len(actual) == len(expected) and all(map(loosely_equal, actual, expected))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            loosely_equal(actual[k], expected[k]) for k in expected
        )
    return bool(actual == expected)


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line, cut to `limit` characters (for rationales)."""
    flat = _WHITESPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
