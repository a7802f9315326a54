"""Route deliveries by event and action; one router per concern, combined in one place.

comments = Router()

@comments.register("issue_comment", action="created")
async def on_comment(event: Event, context: Context) -> Outcome: ...

router = Router(comments, pull_requests)  # bot/webhooks/routes.py
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.service import EvalService, Outcome


@dataclass(frozen=True)
class Event:
    name: str  # X-GitHub-Event
    delivery_id: str  # X-GitHub-Delivery
    payload: dict[str, Any]

    @property
    def action(self) -> str | None:
        action = self.payload.get("action")
        return str(action) if action is not None else None


Handler = Callable[[Event, EvalService], Awaitable[Outcome]]


class Router:
    """Handlers by (event, action); `action=None` matches every action of the event."""

    def __init__(self, *others: Router) -> None:
        self._handlers: dict[tuple[str, str | None], list[Handler]] = {}
        for other in others:
            for key, handlers in other._handlers.items():
                self._handlers.setdefault(key, []).extend(handlers)

    def register(self, event: str, *, action: str | None = None) -> Callable[[Handler], Handler]:
        def add(handler: Handler) -> Handler:
            self._handlers.setdefault((event, action), []).append(handler)
            return handler

        return add

    def knows(self, event: str) -> bool:
        return any(name == event for name, _ in self._handlers)

    def handlers(self, event: Event) -> list[Handler]:
        return self._handlers.get((event.name, None), []) + self._handlers.get(
            (event.name, event.action), []
        )

    async def dispatch(self, event: Event, service: EvalService) -> list[Outcome]:
        """Run every matching handler in registration order."""
        return [await handler(event, service) for handler in self.handlers(event)]
