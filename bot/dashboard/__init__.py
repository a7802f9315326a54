"""The dashboard: server-rendered pages on the bot's FastAPI app (see docs/dashboard.md).

Routers by concern, included by `bot.app.create_app`, which also puts the settings and the store
on `app.state` for the dependencies in deps.py.
"""

from bot.dashboard import (
    asset_routes,
    case_routes,
    chart_routes,
    diff_routes,
    experiment_routes,
    history_routes,
    live_routes,
    login_routes,
    transcript_routes,
)

ROUTERS = (
    login_routes.router,
    # before experiment_routes, whose /experiments/{id:path} would otherwise take their URLs
    chart_routes.router,
    diff_routes.router,
    experiment_routes.router,
    transcript_routes.router,
    history_routes.router,
    case_routes.router,
    live_routes.router,
    asset_routes.router,
)

__all__ = ["ROUTERS"]
