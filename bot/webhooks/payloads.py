"""Read the fields the handlers need from webhook payloads; a missing one, or one of the wrong
type (an object where GitHub sends one, a whole number for ids), is a PayloadError (a 400)."""

from __future__ import annotations

import re
from typing import Any

from bot.github.github_types import PayloadError, PullInfo
from bot.service import Origin


def field(data: Any, *path: str) -> Any:
    """`field(payload, "repository", "full_name")`, or PayloadError naming the missing path."""
    value = data
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            raise PayloadError(f"the payload has no '{'.'.join(path)}'")
    return value


def mapping(data: Any, *path: str) -> dict[str, Any]:
    """`field(...)` that must be a JSON object."""
    value = field(data, *path)
    if not isinstance(value, dict):
        raise PayloadError(f"the payload's '{'.'.join(path)}' is not an object")
    return value


def whole_number(value: Any, name: str) -> int:
    """A positive JSON integer (GitHub's ids and numbers); anything else is a PayloadError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise PayloadError(f"the payload's '{name}' is not a positive whole number")
    return value


REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def repo_name(payload: dict[str, Any]) -> str:
    """`repository.full_name` as GitHub spells it (`owner/name`), or PayloadError."""
    name = field(payload, "repository", "full_name")
    if not isinstance(name, str) or not REPO_NAME.fullmatch(name):
        raise PayloadError("the payload's 'repository.full_name' is not an owner/name")
    return name


LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


def login(payload: dict[str, Any], *path: str) -> str:
    """A GitHub login (letters, digits, hyphens; `name[bot]` for Apps), or PayloadError: it
    becomes part of API paths (`/collaborators/<login>/permission`)."""
    name = field(payload, *path)
    if not isinstance(name, str) or not LOGIN.fullmatch(name):
        raise PayloadError(f"the payload's '{'.'.join(path)}' is not a GitHub login")
    return name


def installation_id(payload: dict[str, Any]) -> int | None:
    installation = payload.get("installation") or {}
    value = installation.get("id") if isinstance(installation, dict) else None
    return whole_number(value, "installation.id") if value is not None else None


def comment_origin(payload: dict[str, Any]) -> Origin:
    comment = mapping(payload, "comment")
    association = comment.get("author_association")
    return Origin(
        repo=repo_name(payload),
        number=whole_number(field(payload, "issue", "number"), "issue.number"),
        actor=login(payload, "comment", "user", "login"),
        installation_id=installation_id(payload),
        association=association if isinstance(association, str) else None,
        comment_id=whole_number(field(payload, "comment", "id"), "comment.id"),
    )


def pull_info(payload: dict[str, Any]) -> PullInfo:
    """The payload's `pull_request`; a malformed one (a field of the wrong type) is a
    PayloadError naming it, not a crash."""
    pull = mapping(payload, "pull_request")
    try:
        info = PullInfo.from_json(pull)
    except PayloadError:
        raise
    except (AttributeError, TypeError, KeyError, ValueError) as error:
        raise PayloadError(f"the payload's 'pull_request' is malformed ({error})") from error
    whole_number(pull.get("number"), "pull_request.number")
    return info


def sender_origin(payload: dict[str, Any], number: int) -> Origin:
    return Origin(
        repo=repo_name(payload),
        number=number,
        actor=login(payload, "sender", "login"),
        installation_id=installation_id(payload),
    )


def is_bot(payload: dict[str, Any]) -> bool:
    """Deliveries caused by a bot account (our own replies included) never trigger anything."""
    sender = payload.get("sender") or {}
    return isinstance(sender, dict) and sender.get("type") == "Bot"
