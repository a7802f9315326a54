"""`evalbot serve` (the webhook app), `evalbot github-event` (one event, for GitHub Actions, handed
to a cluster) and `evalbot action` (one event, run to the end inside the Actions job)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
import uvicorn

from bot import actions, composition, stopping
from bot.app import build_service, create_app, webhook_secret
from bot.commands.errors import CommandError, command_errors
from bot.github.github_auth import GitHubConfigError
from bot.github.github_client import GitHubClients
from bot.github.github_types import PayloadError
from bot.launcher import TemporalLauncher
from bot.metrics import MULTIPROC_ENV, scrape_registry
from bot.metrics_server import serving
from bot.webhooks.routes import build_router
from bot.webhooks.routing import Event, Router
from workflows.settings import Settings
from workflows.store import Store


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--workers/--no-workers",
    default=False,
    help="Also run the Temporal workers here (always, with the embedded dev server).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Web processes sharing the port (needs EVALBOT_TEMPORAL_ADDRESS).",
)
@click.option(
    "--dashboard-only",
    is_flag=True,
    help="Serve the dashboard and /metrics without the webhook: no GitHub setting needed.",
)
@click.pass_obj
@command_errors
def serve_command(
    settings: Settings, host: str, port: int, workers: bool, processes: int, dashboard_only: bool
) -> None:
    """Serve the GitHub webhook at POST /github/webhook, the dashboard and GET /healthz.

    Needs EVALBOT_GITHUB_WEBHOOK_SECRET and GitHub credentials (App or token), unless
    --dashboard-only. With EVALBOT_TEMPORAL_ADDRESS unset, a dev server and the workers run in
    this process."""
    clients = None if dashboard_only else _github_clients(settings)
    if processes > 1 and (workers or dashboard_only or not settings.temporal.address):
        raise CommandError.bad_input(
            "--processes above 1 needs EVALBOT_TEMPORAL_ADDRESS, no --workers and the webhook"
        )
    store = composition.open_store(settings)  # migrates the database once, before any process
    if processes > 1:
        _serve_processes(settings, store, host, port, processes)
        return
    try:
        asyncio.run(_serve(settings, store, clients, host, port, workers))
    except KeyboardInterrupt:
        sys.exit(0)


def _github_clients(settings: Settings) -> GitHubClients:
    try:
        webhook_secret(settings)
        return GitHubClients(settings)
    except GitHubConfigError as error:
        raise CommandError.bad_input(str(error)) from None


def _serve_processes(
    settings: Settings, store: Store, host: str, port: int, processes: int
) -> None:
    """Processes share one socket; each builds its app from the same environment. Their metrics
    go to one multiprocess folder, so any of them (or the listener at
    EVALBOT_METRICS_APP_ADDRESS, served from here) answers for all."""
    click.echo(f"evalbot serve: http://{host}:{port}/github/webhook ({processes} processes)")
    with _multiprocess_metrics(), _app_metrics_listener(settings, store, None):
        _run_processes(settings, host, port, processes)


def _run_processes(settings: Settings, host: str, port: int, processes: int) -> None:
    uvicorn.run(
        "bot.app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=processes,
        timeout_graceful_shutdown=_grace_s(settings),
        log_level="info",
        access_log=False,
    )


async def _serve(
    settings: Settings,
    store: Store,
    clients: GitHubClients | None,
    host: str,
    port: int,
    workers: bool,
) -> None:
    stop = stopping.stop_requested()  # from here on SIGTERM/SIGINT stop cleanly (docs/deploy.md)
    if settings.temporal.address and not workers:  # the web process alone: no sandboxes here
        await _serve_app(
            settings,
            store,
            clients,
            host,
            port,
            TemporalLauncher(settings, store, runtime=composition.temporal_runtime()),
            stop,
        )
        return
    async with composition.session(settings, store, run_workers=workers) as active:
        launcher = TemporalLauncher(settings, store, active.client)
        await _serve_app(settings, store, clients, host, port, launcher, stop)
    click.echo("evalbot serve: stopped")


async def _serve_app(
    settings: Settings,
    store: Store,
    clients: GitHubClients | None,
    host: str,
    port: int,
    launcher: TemporalLauncher,
    stop: asyncio.Event,
) -> None:
    app = create_app(settings, launcher, store, github=clients, webhook=clients is not None)
    where = settings.temporal.address or "embedded dev server, workers in this process"
    path = "/github/webhook" if clients is not None else "/dashboard (no webhook)"
    click.echo(f"evalbot serve: http://{host}:{port}{path} (Temporal: {where})")
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        timeout_graceful_shutdown=_grace_s(settings),
    )
    if stop.is_set():  # a signal during start-up: nothing to serve
        return
    with _app_metrics_listener(settings, store, app):  # MetricsAddressError: one sentence
        await stopping.StoppableServer(config).serve_until(stop)


@contextlib.contextmanager
def _multiprocess_metrics() -> Iterator[None]:
    """A fresh PROMETHEUS_MULTIPROC_DIR for this serve's processes (they inherit it), removed
    after them: counters of an earlier serve never leak into this one."""
    folder = tempfile.mkdtemp(prefix="evalbot-metrics-")
    previous = os.environ.get(MULTIPROC_ENV)
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(MULTIPROC_ENV, None)
        else:
            os.environ[MULTIPROC_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _app_metrics_listener(settings: Settings, store: Store, app: Any) -> Iterator[None]:
    """The app's metrics at EVALBOT_METRICS_APP_ADDRESS, without a token: `app`'s registry, or
    (None) every process's multiprocess files. Nothing when unset."""
    address = settings.metrics.app_address
    if not address:
        yield
        return
    registry = app.state.metrics.registry if app is not None else None
    with serving(
        address,
        registry or scrape_registry(store.engine, None),
        "EVALBOT_METRICS_APP_ADDRESS",
    ):
        yield


def _grace_s(settings: Settings) -> int:
    return max(1, round(settings.temporal.graceful_shutdown_s))


@click.command("github-event")
@click.option("--name", "event_name", required=True, help="The event, e.g. issue_comment.")
@click.option(
    "--payload",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The event payload (in GitHub Actions: $GITHUB_EVENT_PATH).",
)
@click.option("--delivery", default="", help="An id for de-duplication (e.g. the run id).")
@click.pass_obj
@command_errors
def github_event_command(settings: Settings, event_name: str, payload: Path, delivery: str) -> None:
    """Handle one GitHub event from a file, as the webhook would, and print the outcome as JSON.

    For GitHub Actions (.github/workflows/eval.yml): the payload comes from GitHub's event file,
    so it is not signed; experiments go to EVALBOT_TEMPORAL_ADDRESS."""
    data = _read_payload(payload)
    try:
        clients = GitHubClients(settings)
    except GitHubConfigError as error:
        raise CommandError.bad_input(str(error)) from None
    store = composition.open_store(settings)
    outcomes = asyncio.run(_handle_one(settings, store, clients, Event(event_name, delivery, data)))
    click.echo(json.dumps(outcomes, indent=2))


def _read_payload(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CommandError.bad_input(f"cannot read the event payload {path}: {error}") from None
    if not isinstance(data, dict):
        raise CommandError.bad_input(f"the event payload {path} is not a JSON object")
    return data


async def _handle_one(
    settings: Settings, store: Store, clients: GitHubClients, event: Event
) -> list[dict[str, Any]]:
    if not settings.temporal.address:
        raise CommandError.bad_input(
            "EVALBOT_TEMPORAL_ADDRESS is not set; github-event submits to a cluster"
        )
    try:
        handlers, skipped = build_router().select(event)
        if not handlers:
            return [{"action": "ignored", "detail": "; ".join(skipped)}]
        if event.delivery_id and not store.record_delivery(event.delivery_id, event.name):
            return [{"action": "duplicate", "delivery": event.delivery_id}]
        service = build_service(
            settings,
            TemporalLauncher(settings, store, runtime=composition.temporal_runtime()),
            clients,
            store,
        )
        return [asdict(o) for o in await Router.run(handlers, event, service)]
    except PayloadError as error:
        raise CommandError.bad_input(str(error)) from None


@click.command("action")
@click.option(
    "--name",
    "event_name",
    envvar="GITHUB_EVENT_NAME",
    help="The event, e.g. pull_request (default: $GITHUB_EVENT_NAME).",
)
@click.option(
    "--payload",
    envvar="GITHUB_EVENT_PATH",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The event payload (default: $GITHUB_EVENT_PATH).",
)
@click.pass_obj
@command_errors
def action_command(settings: Settings, event_name: str | None, payload: Path | None) -> None:
    """Handle this GitHub Actions job's event as the webhook app would, and run what it starts
    here, on the embedded Temporal dev server, until it ends (docs/github-bot.md, "Actions-only
    mode"). Prints the outcome as JSON; exits 1 when an experiment failed."""
    if not event_name or payload is None:
        raise CommandError.bad_input(
            "no event to handle: run this in a GitHub Actions job (it sets GITHUB_EVENT_NAME and "
            "GITHUB_EVENT_PATH), or pass --name and --payload"
        )
    data = _read_payload(payload)
    settings = actions.actions_settings(settings, os.environ)
    try:
        clients = GitHubClients(settings)
    except GitHubConfigError as error:
        raise CommandError.bad_input(str(error)) from None
    store = composition.open_store(settings)
    event = Event(event_name, actions.delivery_id(os.environ), data)
    try:
        result = asyncio.run(_run_job(settings, store, clients, event))
    except PayloadError as error:
        raise CommandError.bad_input(str(error)) from None
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(result.summary())
    click.echo(json.dumps({"outcomes": [asdict(o) for o in result.outcomes],
                           "experiments": result.experiments}, indent=2))  # fmt: skip
    if result.failed:
        raise CommandError.could_not_run("an experiment failed; its report says why")


async def _run_job(
    settings: Settings, store: Store, clients: GitHubClients, event: Event
) -> actions.JobResult:
    """The job's cancellation (SIGINT, then SIGTERM from the runner) cancels the experiments."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        return await actions.handle_event(settings, store, clients, event, stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


COMMANDS: list[click.Command] = [serve_command, github_event_command, action_command]
