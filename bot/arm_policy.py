"""What the arms of a `/eval` comment may ask for (docs/github-bot.md, "Arms"): which commits, and
which config keys. The comment's grammar is the CLI's (workflows/engine/arm_grammar.py); these are
the trust rules on top, for code and settings that come from a pull request.

Refs: `HEAD` is the PR's head commit, `BASE` (or the base branch's name, e.g. `main`) its base
commit (the merge base with `--vs merge-base`). A same-repository PR may also name a full
40-character commit SHA. A fork's arms run only the head commit a maintainer approved, or the base:
any other ref is refused (it could be unreviewed code).

Config keys: only those in `EVALBOT_GITHUB_ARM_CONFIG_KEYS`; and never one that names a
credential or an endpoint (an agent told to send its requests elsewhere would send its injected
API keys along), even when listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from bot.github.github_types import PullInfo
from workflows.catalog.models import ArmSpec
from workflows.engine.arm_grammar import ArmRequest

HEAD_REF = "HEAD"
BASE_REF = "BASE"
FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
SECRET_LIKE = re.compile(
    r"secret|passw|credential|api[_.-]?key|auth|cookie|private|"
    r"(^|[_.-])(key|token|env|url|uri|host|endpoint|proxy|dsn)([_.-]|$)",
    re.IGNORECASE,
)


class ArmRefused(ValueError):
    """An arm the trust rules forbid; `str()` is one sentence for the PR."""


def check_config_keys(keys: Iterable[str], allowed: frozenset[str]) -> None:
    """ArmRefused for the first key that could expose secrets or that is not allowed here."""
    for key in keys:
        if SECRET_LIKE.search(key):
            raise ArmRefused(
                f"config key '{key}' is refused: a PR comment may not set keys naming credentials "
                "or endpoints, since they could expose the run's secrets"
            )
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ArmRefused(
                f"unknown config key '{key}' (allowed from PR comments: {known}); an operator "
                "can allow more with EVALBOT_GITHUB_ARM_CONFIG_KEYS"
            )


def pr_arm(arm: ArmRequest, pull: PullInfo, base_sha: str) -> ArmSpec:
    """The arm at the commit its ref names in this PR; ArmRefused when the rules forbid it."""
    ref, commit = _resolve(arm, pull, base_sha)
    return ArmSpec(name=arm.name, ref=ref, commit=commit, config=dict(arm.config))


def head_ref(pull: PullInfo) -> str:
    return f"refs/pull/{pull.number}/head"


def _resolve(arm: ArmRequest, pull: PullInfo, base_sha: str) -> tuple[str, str]:
    ref = arm.ref
    if ref == HEAD_REF or ref.lower() == pull.head_sha.lower():
        return head_ref(pull), pull.head_sha
    if ref in (BASE_REF, pull.base_ref) or ref.lower() == base_sha.lower():
        return pull.base_ref, base_sha
    if pull.is_fork:
        raise ArmRefused(
            f"arm '{arm.name}' asks for '{ref}', but this pull request comes from a fork: its arms "
            f"may run only {HEAD_REF} (the approved commit {pull.head_sha[:12]}) or {BASE_REF}"
        )
    if FULL_SHA.match(ref):
        return ref.lower(), ref.lower()
    raise ArmRefused(
        f"arm '{arm.name}' asks for '{ref}'; name {HEAD_REF}, {BASE_REF} (or "
        f"'{pull.base_ref}'), or a full 40-character commit SHA"
    )
