"""Validate a judge's reply: one JSON object with a score in [0, 1] and a non-empty rationale."""

from __future__ import annotations

import json
import math
import re

_FENCE = re.compile(r"^```(?:json)?\s*\n?(?P<body>.*?)\n?```$", re.DOTALL | re.IGNORECASE)
MAX_RATIONALE = 1000


class MalformedVerdict(ValueError):
    """The reply is not a verdict; `str()` says why in a phrase (never the whole reply)."""


def parse_verdict(content: str) -> tuple[float, str]:
    """(score, rationale) from the reply text; MalformedVerdict otherwise.

    Accepts the object alone or inside one ```json fence; a numeric string score ("0.8") is read
    as a number. Booleans, NaN, infinities and out-of-range scores are refused."""
    data = _json_object(content)
    score = _score(data.get("score"))
    rationale = data.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise MalformedVerdict("'rationale' is missing or empty")
    return score, " ".join(rationale.split())[:MAX_RATIONALE]


def _json_object(content: str) -> dict[str, object]:
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedVerdict(f"not JSON ({error.msg} at char {error.pos})") from None
    if not isinstance(data, dict):
        raise MalformedVerdict(f"expected a JSON object, got {type(data).__name__}")
    return data


def _score(value: object) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise MalformedVerdict("'score' is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedVerdict("'score' is missing or not a number")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise MalformedVerdict(f"'score' {number} is outside [0, 1]")
    return number
