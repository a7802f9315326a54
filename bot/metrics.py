"""The web app's metrics, through prometheus_client (docs/deploy.md, "Metrics").

Counted as things happen, in the process: webhook deliveries by event and HTTP status, and
experiments the bot started, reran or cancelled. The one thing read at scrape time is
`evalbot_experiments{state}`, a single GROUP BY over the experiments table; the runs table is never
read (runs are counted by the workers as they store them: workflows/engine/telemetry.py).

With `serve --processes N` every process counts into prometheus_client's multiprocess files
(PROMETHEUS_MULTIPROC_DIR, set by `serve` for its processes), so any process, or the single
listener at EVALBOT_METRICS_APP_ADDRESS, answers for all of them.

GET /metrics on the app's port needs the metrics token (settings.dashboard.metrics_token) as
`Authorization: Bearer TOKEN` or as the password of Basic auth (Prometheus' `authorization` or
`basic_auth`); without one configured, it refuses everyone.
"""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.launcher import Launcher
from bot.webhooks.endpoint import PATH
from workflows.catalog.models import ExperimentSpec
from workflows.engine.types import Progress
from workflows.settings import Settings
from workflows.store.tables import experiments

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable


class ExperimentStates(Collector):
    """`evalbot_experiments{state}`: one GROUP BY over the experiments table per scrape."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("evalbot_experiments", "Experiments by state.", labels=["state"])
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(experiments.c.status, func.count()).group_by(experiments.c.status)
            ).all()
        for state, count in sorted(rows):
            family.add_metric([state], count)
        yield family


def scrape_registry(engine: Engine | None, counters: CollectorRegistry | None) -> CollectorRegistry:
    """What a scrape answers: `counters` (this process's), or every process's multiprocess files
    when None; plus the experiments by state when `engine` is given."""
    registry = counters if counters is not None else CollectorRegistry()
    if counters is None:
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    if engine is not None:
        registry.register(ExperimentStates(engine))
    return registry


class AppMetrics:
    """The web process's counters and the registry a scrape reads (`self.registry`)."""

    def __init__(self, engine: Engine | None, *, multiprocess: bool | None = None) -> None:
        if multiprocess is None:
            multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        own = None if multiprocess else CollectorRegistry()
        self.deliveries = Counter(
            "evalbot_webhook_deliveries", "Webhook deliveries by event and HTTP status.",
            ["event", "code"], registry=own,
        )  # fmt: skip
        self.experiments = Counter(
            "evalbot_bot_experiments", "Experiments the bot started, reran or cancelled.",
            ["action"], registry=own,
        )  # fmt: skip
        self.registry = scrape_registry(engine, own)

    def scrape(self) -> bytes:
        return generate_latest(self.registry)


class MeteredLauncher:
    """A `Launcher` that counts what it hands to Temporal (`evalbot_bot_experiments`)."""

    def __init__(self, launcher: Launcher, metrics: AppMetrics) -> None:
        self._launcher = launcher
        self._metrics = metrics

    async def start(self, spec: ExperimentSpec, reporter: dict[str, Any]) -> str:
        started = await self._launcher.start(spec, reporter)
        self._metrics.experiments.labels("started").inc()
        return started

    async def cancel(self, experiment_id: str) -> bool:
        cancelled = await self._launcher.cancel(experiment_id)
        if cancelled:
            self._metrics.experiments.labels("cancelled").inc()
        return cancelled

    async def rerun(self, experiment_id: str, reporter: dict[str, Any]) -> str:
        rerun = await self._launcher.rerun(experiment_id, reporter)
        self._metrics.experiments.labels("rerun").inc()
        return rerun

    async def status(self, experiment_id: str) -> Progress | None:
        return await self._launcher.status(experiment_id)

    async def find(self, prefix: str, *, running_only: bool = True) -> list[str]:
        return await self._launcher.find(prefix, running_only=running_only)


class DeliveryCounter:
    """ASGI middleware counting webhook deliveries by event and status (pure ASGI: nothing else
    is buffered). The event is a label only when the router knows it: no unbounded series."""

    def __init__(self, app: ASGIApp, metrics: AppMetrics, known: Callable[[str], bool]) -> None:
        self.app = app
        self.metrics = metrics
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            headers = dict(scope.get("headers") or [])
            event = headers.get(b"x-github-event", b"").decode("latin-1")
            label = event if event == "ping" or self.known(event) else "other"
            self.metrics.deliveries.labels(label, str(status)).inc()


def metrics_router(metrics: AppMetrics, settings: Settings) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics")
    def scrape(request: Request) -> Response:
        if not metrics_authorized(settings, request.headers.get("authorization", "")):
            return PlainTextResponse(
                "/metrics needs the metrics token (EVALBOT_DASHBOARD_METRICS_TOKEN) as a Bearer "
                "token or Basic password, or scrape EVALBOT_METRICS_APP_ADDRESS",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer, Basic realm="evalbot metrics"'},
            )
        return Response(metrics.scrape(), media_type=CONTENT_TYPE_LATEST)

    return router


def metrics_authorized(settings: Settings, header: str) -> bool:
    """The Authorization header carries the metrics token (Bearer, or Basic with any user)."""
    token = settings.dashboard.metrics_token
    if token is None or not token.get_secret_value():
        return False
    scheme, _, value = header.partition(" ")
    sent = value.strip()
    if scheme.lower() == "basic":
        try:
            sent = base64.b64decode(sent, validate=True).decode().partition(":")[2]
        except (ValueError, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(sent.encode(), token.get_secret_value().encode())
