"""The dashboard: server-rendered pages on the bot's FastAPI app (see docs/dashboard.md)."""

from bot.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
