"""The web process: `create_app(settings, launcher, store)` builds the FastAPI app.

It verifies, routes and hands off; it never waits for an experiment. Build the launcher, the
store and (optionally) the GitHub clients at the edge and pass them in.
"""

from __future__ import annotations

from fastapi import FastAPI

from bot import composition, dashboard
from bot.dashboard.pages import compile_templates
from bot.dashboard.security import SecurityMiddleware
from bot.github.gateway import RepoGateway
from bot.github.github_auth import GitHubConfigError
from bot.github.github_client import GitHubClients
from bot.launcher import Launcher, TemporalLauncher
from bot.metrics import AppMetrics, DeliveryCounter, MeteredLauncher, metrics_router
from bot.service import EvalService
from bot.webhooks.deliveries import DeliveryGate, DeliveryLog
from bot.webhooks.endpoint import webhook_api
from bot.webhooks.routes import build_router
from workflows.blobs import open_blob_store
from workflows.settings import Settings
from workflows.store import Store


def create_app(
    settings: Settings,
    launcher: Launcher,
    store: DeliveryLog,
    *,
    github: GitHubClients | None = None,
    webhook: bool = True,
) -> FastAPI:
    """The webhook app; GitHubConfigError when the webhook secret or credentials are unset.
    Without `webhook` (`evalbot serve --dashboard-only`): the dashboard and /metrics only, and
    no GitHub setting is needed."""
    spend = store if isinstance(store, Store) else None  # the daily cap counts spend there
    app = FastAPI(title="evalbot", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(SecurityMiddleware, settings=settings)  # headers, CSRF (docs/dashboard.md)
    app.state.settings = settings  # the dashboard's dependencies read these (bot/dashboard/deps.py)
    app.state.store = spend if spend is not None else Store.from_settings(settings)
    metrics = app.state.metrics = AppMetrics(app.state.store.engine)  # docs/deploy.md, "Metrics"
    launcher = MeteredLauncher(launcher, metrics)
    app.state.blobs = open_blob_store(settings)  # run outputs by key (docs/store.md, "Blobs")
    app.state.launcher = launcher  # the live progress asks it (bot/dashboard/live_routes.py)
    if webhook:
        add_webhook(app, settings, launcher, store, github)
    for router in dashboard.ROUTERS:  # /dashboard (docs/dashboard.md)
        app.include_router(router)
    compile_templates()  # now, not on a visitor's first page
    app.include_router(metrics_router(metrics, settings))  # GET /metrics, with its own token

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def add_webhook(
    app: FastAPI,
    settings: Settings,
    launcher: Launcher,
    store: DeliveryLog,
    github: GitHubClients | None,
) -> None:
    """POST /github/webhook, with its delivery counts (GitHubConfigError when unconfigured)."""
    secret = webhook_secret(settings)
    spend = store if isinstance(store, Store) else None
    service = build_service(settings, launcher, github or GitHubClients(settings), spend)
    routes = build_router()
    app.add_middleware(DeliveryCounter, metrics=app.state.metrics, known=routes.knows)
    app.include_router(
        webhook_api(
            secret,
            settings.github.max_body_bytes,
            routes,
            service,
            DeliveryGate(store, settings.github.delivery_lease_s),
        )
    )


def app_from_environment() -> FastAPI:
    """The app for `uvicorn --factory`, once per process (`evalbot serve --processes N`):
    settings from the EVALBOT_* environment, Temporal at EVALBOT_TEMPORAL_ADDRESS. The database
    is migrated by the parent before the processes start."""
    settings = Settings()
    store = Store.from_settings(settings)
    return create_app(
        settings, TemporalLauncher(settings, store, runtime=composition.temporal_runtime()), store
    )


def webhook_secret(settings: Settings) -> bytes:
    secret = settings.github.webhook_secret
    if secret is None or not secret.get_secret_value():
        raise GitHubConfigError(
            "EVALBOT_GITHUB_WEBHOOK_SECRET is not set; the bot refuses unsigned webhooks"
        )
    return secret.get_secret_value().encode()


def build_service(
    settings: Settings, launcher: Launcher, github: GitHubClients, store: Store | None = None
) -> EvalService:
    def gateway(repo: str, installation_id: int | None) -> RepoGateway:
        return RepoGateway(github.for_repo(repo, installation_id), repo)

    return EvalService(settings, launcher, gateway, github.bot_login, store)
