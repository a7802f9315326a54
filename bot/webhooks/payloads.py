"""Read the fields the handlers need from webhook payloads; a missing one is a PayloadError."""

from __future__ import annotations

from typing import Any

from bot.github.github_types import PayloadError
from bot.service import Origin


def field(data: Any, *path: str) -> Any:
    """`field(payload, "repository", "full_name")`, or PayloadError naming the missing path."""
    value = data
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            raise PayloadError(f"the payload has no '{'.'.join(path)}'")
    return value


def installation_id(payload: dict[str, Any]) -> int | None:
    installation = payload.get("installation") or {}
    value = installation.get("id") if isinstance(installation, dict) else None
    return int(value) if value is not None else None


def comment_origin(payload: dict[str, Any]) -> Origin:
    return Origin(
        repo=str(field(payload, "repository", "full_name")),
        number=int(field(payload, "issue", "number")),
        actor=str(field(payload, "comment", "user", "login")),
        installation_id=installation_id(payload),
        association=payload["comment"].get("author_association"),
        comment_id=int(field(payload, "comment", "id")),
    )


def sender_origin(payload: dict[str, Any], number: int) -> Origin:
    return Origin(
        repo=str(field(payload, "repository", "full_name")),
        number=number,
        actor=str(field(payload, "sender", "login")),
        installation_id=installation_id(payload),
    )


def is_bot(payload: dict[str, Any]) -> bool:
    """Deliveries caused by a bot account (our own replies included) never trigger anything."""
    sender = payload.get("sender") or {}
    return isinstance(sender, dict) and sender.get("type") == "Bot"
