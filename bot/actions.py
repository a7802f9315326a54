"""Actions-only mode: one GitHub Actions job is the whole service for one event.

The job reads the event GitHub Actions wrote to disk (`GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`),
decides exactly as the webhook app does (the same routers, grammar, trust checks and replies:
`bot/webhooks/`, `bot/service.py`), and runs what that starts on an engine of its own: the
embedded Temporal dev server, with this process as the worker, started only when something is
launched. The job waits for its experiments; their `publish_report` activity posts and edits the
sticky comment through PyGithub, with the workflow's `GITHUB_TOKEN` against `GITHUB_API_URL`.
docs/github-bot.md, "Actions-only mode".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client, WorkflowFailureError

from bot import composition
from bot.app import build_service
from bot.github.github_client import GitHubClients
from bot.launcher import TemporalLauncher
from bot.service import EVAL_LABEL_PREFIX, Outcome
from bot.webhooks.routes import build_router
from bot.webhooks.routing import Event, Router
from workflows.catalog.models import ExperimentSpec
from workflows.engine import engine_client as engine
from workflows.engine.failures import reason_of
from workflows.engine.types import Progress
from workflows.settings import Settings
from workflows.store import Store

ACTIONS_BOT_LOGIN = "github-actions[bot]"  # who comments with a workflow's GITHUB_TOKEN
CANCEL_GRACE_S = 6.0  # GitHub sends SIGINT, then SIGTERM 7.5 s later: report before that


def actions_settings(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """`settings` completed from the variables every Actions job has: the API at GITHUB_API_URL
    (unless EVALBOT_GITHUB_API_URL is set) and, when no other credentials are configured, the
    workflow's GITHUB_TOKEN, posting as github-actions[bot]."""
    github: dict[str, Any] = {}
    if "EVALBOT_GITHUB_API_URL" not in environ and environ.get("GITHUB_API_URL"):
        github["api_url"] = environ["GITHUB_API_URL"]
    token = environ.get("GITHUB_TOKEN")
    if settings.github.token is None and not settings.github.app_id and token:
        github["token"] = SecretStr(token)
        github["bot_login"] = settings.github.bot_login or ACTIONS_BOT_LOGIN
    return settings.with_changes(github=github) if github else settings


def delivery_id(environ: Mapping[str, str]) -> str:
    """This run's attempt, as the delivery id the handlers' logs and outcomes name."""
    run, attempt = environ.get("GITHUB_RUN_ID", "local"), environ.get("GITHUB_RUN_ATTEMPT", "1")
    return f"actions-{run}-{attempt}"


class JobEngine:
    """The job's `Launcher`: the embedded engine, started on the first launch and stopped with
    the job. Until then nothing of this PR runs here (an earlier job's experiments ran on that
    job's engine and ended with it), so `find` and `status` answer without starting a server."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self._settings = settings
        self._store = store
        self._stack = contextlib.AsyncExitStack()
        self._launcher: TemporalLauncher | None = None
        self.launched: list[str] = []

    async def _engine(self) -> TemporalLauncher:
        if self._launcher is None:
            active = await self._stack.enter_async_context(
                composition.session(self._settings, self._store)
            )
            self._launcher = TemporalLauncher(self._settings, self._store, active.client)
        return self._launcher

    async def start(self, spec: ExperimentSpec, reporter: dict[str, Any]) -> str:
        started = await (await self._engine()).start(spec, reporter)
        self.launched.append(started)
        return started

    async def rerun(self, experiment_id: str, reporter: dict[str, Any]) -> str:
        started = await (await self._engine()).rerun(experiment_id, reporter)
        self.launched.append(started)
        return started

    async def cancel(self, experiment_id: str) -> bool:
        return self._launcher is not None and await self._launcher.cancel(experiment_id)

    async def status(self, experiment_id: str) -> Progress | None:
        return None if self._launcher is None else await self._launcher.status(experiment_id)

    async def find(self, prefix: str, *, running_only: bool = True) -> list[str]:
        if self._launcher is None:
            return []
        return await self._launcher.find(prefix, running_only=running_only)

    async def wait(self, stop: asyncio.Event) -> dict[str, str]:
        """How each launched experiment ended ('done', 'cancelled' or why it failed). When `stop`
        is set first (the job is being cancelled), the experiments are cancelled and given
        CANCEL_GRACE_S to post their last report."""
        if not self.launched:
            return {}
        launcher = await self._engine()
        client = await launcher.client()
        waits = {i: asyncio.ensure_future(_ending(client, i)) for i in dict.fromkeys(self.launched)}
        stopping = asyncio.ensure_future(stop.wait())
        pending: set[asyncio.Future[Any]] = set(waits.values())
        while pending and not stop.is_set():
            _, pending = await asyncio.wait(
                {stopping, *pending}, return_when=asyncio.FIRST_COMPLETED
            )
            pending.discard(stopping)
        stopping.cancel()
        if pending:  # the job is being cancelled
            for experiment_id in waits:
                await launcher.cancel(experiment_id)
            await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
        ended = {}
        for experiment_id, task in waits.items():
            ended[experiment_id] = task.result() if task.done() else "cancelled"
            task.cancel()
        return ended

    async def aclose(self) -> None:
        await self._stack.aclose()


async def _ending(client: Client, experiment_id: str) -> str:
    try:
        progress = await engine.wait_for(client, experiment_id)
    except WorkflowFailureError as error:
        return f"failed: {reason_of(error)}"
    if progress.stopped_by_budget:
        return "stopped by budget"
    return "cancelled" if progress.cancelled else "done"


@dataclass
class JobResult:
    outcomes: list[Outcome]
    experiments: dict[str, str] = field(default_factory=dict)  # id -> how it ended

    @property
    def failed(self) -> bool:
        return any(end.startswith("failed") for end in self.experiments.values())

    def summary(self) -> str:
        """Markdown for the job's step summary."""
        lines = [f"**evalbot**: {o.action}" + (f" ({o.detail})" if o.detail else "")
                 for o in self.outcomes]  # fmt: skip
        lines += [f"- `{i}`: {end}" for i, end in self.experiments.items()]
        return "\n".join(lines) + "\n"


def job_events(event: Event) -> list[Event]:
    """The deliveries this job handles for `event`: the event itself, except that an added
    `eval:` label stands for every `eval:` label on the PR (the added one first). A new label's
    job cancels the PR's running job (one concurrency group per PR), so it starts again what that
    one ran; each label goes through the webhook app's route and trust checks as its own delivery,
    and starting a dataset that already runs on this head is a no-op."""
    added = event.payload.get("label") or {}
    if (event.name, event.action) != ("pull_request", "labeled") or not isinstance(added, dict):
        return [event]
    name = str(added.get("name") or "")
    if not name.startswith(EVAL_LABEL_PREFIX):
        return [event]
    pull = event.payload.get("pull_request") or {}
    on_pull = [str(label.get("name") or "") for label in pull.get("labels") or []
               if isinstance(label, dict)]  # fmt: skip
    others = [n for n in dict.fromkeys(on_pull) if n.startswith(EVAL_LABEL_PREFIX) and n != name]
    return [event] + [
        replace(event, payload={**event.payload, "label": {**added, "name": other}})
        for other in others
    ]


async def handle_event(
    settings: Settings,
    store: Store,
    clients: GitHubClients,
    event: Event,
    stop: asyncio.Event | None = None,
) -> JobResult:
    """Handle one event as the webhook app would, then run what it started to the end.

    PayloadError (bad event) propagates; `stop` set = the job is being cancelled."""
    router = build_router()
    selected = [(one, *router.select(one)) for one in job_events(event)]
    if not any(handlers for _, handlers, _ in selected):
        return JobResult([Outcome("ignored", "; ".join(selected[0][2]))])
    job = JobEngine(settings, store)
    try:
        service = build_service(settings, job, clients, store)
        outcomes: list[Outcome] = []
        for one, handlers, _ in selected:
            outcomes += await Router.run(handlers, one, service)
            if any(o.action == "refused" for o in outcomes):
                break  # the labeler may not, or the fork is unapproved: one reply is enough
        return JobResult(outcomes, await job.wait(stop or asyncio.Event()))
    finally:
        await job.aclose()
