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
Skip = Callable[[Event], str | None]  # why this delivery is not for the handler, or None


def never(event: Event) -> str | None:
    return None


@dataclass(frozen=True)
class Route:
    handler: Handler
    skip: Skip


class Router:
    """Handlers by (event, action); `action=None` matches every action of the event. A route's
    `skip` looks at the payload alone (no I/O) so irrelevant deliveries cost no database write."""

    def __init__(self, *others: Router) -> None:
        self._routes: dict[tuple[str, str | None], list[Route]] = {}
        for other in others:
            for key, routes in other._routes.items():
                self._routes.setdefault(key, []).extend(routes)

    def register(
        self, event: str, *, action: str | None = None, skip: Skip = never
    ) -> Callable[[Handler], Handler]:
        def add(handler: Handler) -> Handler:
            self._routes.setdefault((event, action), []).append(Route(handler, skip))
            return handler

        return add

    def knows(self, event: str) -> bool:
        return any(name == event for name, _ in self._routes)

    def select(self, event: Event) -> tuple[list[Handler], list[str]]:
        """The handlers this delivery is for, and why the other matching ones skip it."""
        routes = self._routes.get((event.name, None), []) + self._routes.get(
            (event.name, event.action), []
        )
        if not routes:
            return [], [f"evalbot does not act on {event.name}.{event.action}"]
        verdicts = [(route.handler, route.skip(event)) for route in routes]
        return [h for h, why in verdicts if why is None], [why for _, why in verdicts if why]

    @staticmethod
    async def run(handlers: list[Handler], event: Event, service: EvalService) -> list[Outcome]:
        """Run the selected handlers in registration order."""
        return [await handler(event, service) for handler in handlers]
