"""The arm grammar, one parser for `evalbot run --arm` and the `/eval … --arm` PR comment
(docs/cli.md, docs/github-bot.md):

    NAME=REF[,key=value...]   an arm: its name, the ref it evaluates, its own config
    key=value                 a config setting; `--set` gives it to every arm, an arm's own wins

The first arm is the baseline. Keys are letters, digits and `_ . -`; a value is everything after
the first `=` (inside an arm, up to the next comma). Errors are `PlanError`s of one sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from workflows.catalog.names import NAME_RULE, is_name

SETTING_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
ARM_EXAMPLE = "pr-mini=HEAD,model=gpt-4.1-mini"


class PlanError(ValueError):
    """The request cannot become an experiment; the message says what to fix."""


class ArmRequest(NamedTuple):
    """An arm as asked for: `ref` is not resolved to a commit yet."""

    name: str
    ref: str
    config: dict[str, str]


def parse_setting(pair: str) -> tuple[str, str]:
    """`key=value` -> (key, value); the value may contain `=` and be empty."""
    key, sep, value = pair.partition("=")
    if not sep or not SETTING_KEY.match(key):
        raise PlanError(
            f"setting '{_shown(pair)}' is not key=value (a key is letters, digits, _ . -)"
        )
    return key, value


def parse_settings(pairs: Iterable[str]) -> dict[str, str]:
    """Settings in order; a key given twice keeps its last value."""
    return dict(parse_setting(pair) for pair in pairs)


def parse_arm(text: str) -> ArmRequest:
    """`NAME=REF[,key=value...]` -> ArmRequest."""
    name, sep, rest = text.partition("=")
    ref, *pairs = rest.split(",")
    if not sep or not is_name(name) or not is_ref(ref):
        raise PlanError(
            f"arm '{_shown(text)}' is not NAME=REF[,key=value...] (e.g. {ARM_EXAMPLE}; "
            f"NAME: {NAME_RULE})"
        )
    return ArmRequest(name, ref, parse_settings(pairs))


def is_ref(text: str) -> bool:
    """A ref as the grammar takes it: not empty, no surrounding whitespace (git checks the rest)."""
    return bool(text.strip()) and text == text.strip()


def arm_requests(
    texts: Iterable[str], common: Mapping[str, str], *, max_arms: int
) -> list[ArmRequest]:
    """Each `--arm` parsed, with the `--set` settings under its own; names unique, at most
    `max_arms` of them."""
    arms = [parse_arm(text) for text in texts]
    return checked_arms(
        [ArmRequest(a.name, a.ref, {**common, **a.config}) for a in arms], max_arms=max_arms
    )


def checked_arms(arms: list[ArmRequest], *, max_arms: int) -> list[ArmRequest]:
    """The arms if their names are unique and there are at most `max_arms`; else PlanError."""
    seen: set[str] = set()
    for arm in arms:
        if arm.name in seen:
            raise PlanError(f"arm '{arm.name}' is given twice; give each arm its own name")
        seen.add(arm.name)
    if len(arms) > max_arms:
        raise PlanError(
            f"{len(arms)} arms are more than the limit of {max_arms}; compare fewer at once"
        )
    return arms


def _shown(text: str, limit: int = 80) -> str:
    """User text quoted in a message: one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
