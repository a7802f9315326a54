"""Every router of the bot, combined in one place."""

from __future__ import annotations

from bot.webhooks import comments, pull_requests
from bot.webhooks.routing import Router


def build_router() -> Router:
    return Router(comments.router, pull_requests.router)
