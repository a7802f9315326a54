"""The composition root: builds the store, provider, grader and extra activities from Settings,
and the process's Temporal runtime.

Everything else receives these objects; nothing else reads the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from bot.metrics_server import MetricsAddressError, serving
from workflows.blobs import open_blob_store
from workflows.engine.embedded import Session, engine_session
from workflows.engine.engine_client import stage_queues
from workflows.engine.grading import CaseGrader
from workflows.engine.queue_depth import queue_names, watch_backlog
from workflows.engine.telemetry import EngineMetrics
from workflows.engine.worker import ROLES
from workflows.providers import create_provider
from workflows.providers.base import SandboxProvider
from workflows.scoring.llm_judge import JudgeConfig, LlmJudge
from workflows.secret_store import LocalSecretStore, resolve_run_secrets
from workflows.settings import Settings
from workflows.store import Store
from workflows.store.rate_limits import JUDGE_BUCKET, MODAL_CREATE_BUCKET, SharedRateLimit

CORE_LOGGER = "temporalio.core"


def open_store(settings: Settings) -> Store:
    store = Store.from_settings(settings)
    store.migrate()
    return store


def extra_activities(settings: Settings, store: Store) -> list[Callable[..., Any]]:
    """Activities of the surfaces (GitHub reporting) registered on the runs worker."""
    from bot.github.github_activities import github_activities

    return list(github_activities(settings, store))


def build_judge(
    settings: Settings,
    store: Store | None = None,
    on_call: Callable[[str], None] | None = None,
) -> LlmJudge | None:
    """The LLM judge for `llm` criteria, or None (they are then "not judged") when no judge URL
    is set. The key comes from EVALBOT_JUDGE_API_KEY or the local secret store. With a store (and
    `store.shared_limits`), `judge.rate_per_s` is the whole cluster's: every process paces its
    requests with one bucket row in the database (docs/judges.md, "Limits across workers").
    `on_call`: the metrics' count of judge requests."""
    if not settings.judge.base_url:
        return None
    config = JudgeConfig(
        base_url=settings.judge.base_url,
        model=settings.judge.model,
        api_key=_judge_key(settings),
        timeout_s=settings.judge.timeout_s,
        max_attempts=settings.judge.max_attempts,
        malformed_attempts=settings.judge.malformed_attempts,
        rate_per_s=settings.judge.rate_per_s,
        burst=settings.judge.burst,
        concurrency=settings.judge.concurrency,
        temperature=settings.judge.temperature,
        cache_dir=settings.resolved_judge_cache_dir,
        input_usd_per_mtok=settings.judge.input_usd_per_mtok,
        output_usd_per_mtok=settings.judge.output_usd_per_mtok,
    )
    shared = store is not None and settings.store.shared_limits
    if not shared:
        return LlmJudge(config, on_call=on_call)
    assert store is not None
    rate = SharedRateLimit(store, JUDGE_BUCKET, settings.judge.rate_per_s, settings.judge.burst)
    return LlmJudge(config, rate=rate, on_call=on_call)


def share_creation_rate(provider: SandboxProvider, settings: Settings, store: Store) -> None:
    """Modal's creations paced by one bucket for the cluster at `modal.creates_per_s`, unless
    `store.shared_limits` is off (docs/modal.md, "Limits across workers")."""
    if provider.name != "modal" or not settings.store.shared_limits:
        return
    from workflows.providers.modal import ModalProvider

    if isinstance(provider, ModalProvider):
        rate = SharedRateLimit(store, MODAL_CREATE_BUCKET, settings.modal.creates_per_s)
        provider.admission.share_rate(rate)


def _judge_key(settings: Settings) -> SecretStr | None:
    if settings.judge.api_key is not None or settings.judge.secret_group is None:
        return settings.judge.api_key
    group = LocalSecretStore.from_settings(settings).read_group(settings.judge.secret_group)
    value = group.get(settings.judge.secret_name)
    return SecretStr(value) if value else None


LOCAL_STAGE_WORKFLOWS = frozenset({"RunWorkflow", "RunBatchWorkflow"})
TASK_DURATION_WARNING = "TMPRL1104"


class ExpectedLongTasks(logging.Filter):
    """Demotes the core's TMPRL1104 ("workflow task duration exceeded 5 seconds") to DEBUG for
    the run workflows: their stages run as local activities, and a workflow task stays open for
    as long as its local activities run — a cell's whole run (docs/engine.md, "Long workflow
    tasks"). For every other workflow (ExperimentWorkflow) a long task is a stall: it stays a
    warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        log = getattr(record, "temporal_log", None)
        expected = (
            log is not None
            and TASK_DURATION_WARNING in log.message
            and log.fields.get("workflow_type") in LOCAL_STAGE_WORKFLOWS
        )
        if expected:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


@functools.cache
def temporal_runtime(metrics_address: str | None = None) -> Runtime:
    """The process's Temporal runtime (one per metrics address: each runtime has its own threads).
    With `metrics_address`, the SDK's own metrics (workers' slots, polls, schedule-to-start
    latency...) are served there by its Prometheus exporter (docs/deploy.md, "Metrics"). The Rust
    core's
    log lines (warnings, e.g. TMPRL1104 "workflow task duration exceeded") are forwarded to the
    Python logger `temporalio.core`, so they go where logging sends them: stderr, unless the
    process configures otherwise. The SDK's default runtime prints them, in colour, on stdout,
    in the middle of `--json` output."""
    core_logger = logging.getLogger(CORE_LOGGER)
    core_logger.addFilter(ExpectedLongTasks())
    forwarding = LogForwardingConfig(logger=core_logger)
    core_logs = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
    )
    exporter = None
    if metrics_address:
        exporter = PrometheusConfig(bind_address=metrics_address, durations_as_seconds=True)
    try:
        return Runtime(telemetry=TelemetryConfig(logging=core_logs, metrics=exporter))
    except Exception as error:  # the core's own error type: the address is taken or invalid
        raise MetricsAddressError(
            f"cannot serve Temporal's metrics on {metrics_address} ({error}); set "
            "EVALBOT_METRICS_TEMPORAL_ADDRESS to a free host:port"
        ) from None


@contextlib.asynccontextmanager
async def session(
    settings: Settings,
    store: Store,
    *,
    run_workers: bool = True,
    roles: Sequence[str] = ROLES,
    metrics: EngineMetrics | None = None,
) -> AsyncIterator[Session]:
    """A Temporal session with this process's workers (embedded dev server when unconfigured),
    counting into `metrics` (new ones when None).
    Their metrics are served at EVALBOT_METRICS_WORKER_ADDRESS and the SDK's at
    EVALBOT_METRICS_TEMPORAL_ADDRESS when set."""
    provider = create_provider(settings)
    share_creation_rate(provider, settings, store)
    if run_workers:
        provider.check_host()  # HostUnsupported: one sentence, before the first cell
        # BlobStoreError: an unreachable or misconfigured bucket stops the worker here, not
        # mid-run with the outputs lost (docs/store.md, "Blobs")
        blobs = open_blob_store(settings)
        await asyncio.to_thread(blobs.check)
        # what a worker killed mid-create or mid-collect left behind
        provider.reap_orphans()
        await asyncio.to_thread(blobs.reap_staging)
    metrics = metrics if metrics is not None else EngineMetrics()
    judge = build_judge(settings, store, on_call=metrics.judge_call)
    exported = settings.metrics.temporal_address if run_workers else None
    try:
        async with (
            engine_session(
                settings,
                provider,
                store,
                CaseGrader(judge),
                run_workers=run_workers,
                roles=roles,
                extra_activities=extra_activities(settings, store),
                secrets=functools.partial(resolve_run_secrets, settings),
                runtime=temporal_runtime(exported),
                metrics=metrics,
            ) as active,
            worker_metrics(settings, metrics, active.client, run_workers),
        ):
            yield active
    finally:
        provider.close()
        if judge is not None:
            judge.close()


@contextlib.asynccontextmanager
async def worker_metrics(
    settings: Settings, metrics: EngineMetrics, client: Client, run_workers: bool
) -> AsyncIterator[None]:
    """The workers' metrics at EVALBOT_METRICS_WORKER_ADDRESS, with the task queues' backlog
    refreshed every EVALBOT_METRICS_QUEUE_DEPTH_INTERVAL_S; nothing when unset."""
    address = settings.metrics.worker_address
    if not (run_workers and address):
        yield
        return
    every_s = settings.metrics.queue_depth_interval_s
    queues = queue_names(stage_queues(settings))
    with serving(address, metrics.registry, "EVALBOT_METRICS_WORKER_ADDRESS"):
        watcher = None
        if every_s > 0:
            watcher = asyncio.create_task(watch_backlog(client, queues, metrics, every_s))
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
