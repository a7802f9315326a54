"""infra/github-app.yml subscribes to exactly the events the routers handle."""

from __future__ import annotations

import re

from bot.webhooks.routes import build_router
from tests.conftest import REPO_ROOT

MANIFEST = REPO_ROOT / "infra" / "github-app.yml"


def section(text: str, key: str) -> list[str]:
    """The entries of a top-level YAML key: list items, or mapping keys."""
    lines = text.split(f"\n{key}:\n", 1)[1].splitlines()
    entries = []
    for line in lines:
        if not line.startswith("  "):
            break
        match = re.match(r"^  (?:- )?([a-z_]+)", line)
        if match:
            entries.append(match[1])
    return entries


def test_events_match_the_routers() -> None:
    events = section(MANIFEST.read_text(), "default_events")
    router = build_router()
    assert events == ["issue_comment", "pull_request"]
    assert all(router.knows(event) for event in events)
    assert not router.knows("push") and not router.knows("installation")


def test_permissions_are_the_least_the_bot_needs() -> None:
    permissions = section(MANIFEST.read_text(), "default_permissions")
    expected = ["metadata", "contents", "pull_requests", "issues", "checks", "statuses"]
    assert permissions == expected
    assert "administration" not in permissions and "workflows" not in permissions
