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
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from workflows.blobs import open_blob_store
from workflows.engine.embedded import Session, engine_session
from workflows.engine.grading import CaseGrader
from workflows.engine.worker import ROLES
from workflows.providers import create_provider
from workflows.scoring.llm_judge import JudgeConfig, LlmJudge
from workflows.secret_store import LocalSecretStore, resolve_run_secrets
from workflows.settings import Settings
from workflows.store import Store

CORE_LOGGER = "temporalio.core"


def open_store(settings: Settings) -> Store:
    store = Store.from_settings(settings)
    store.migrate()
    return store


def extra_activities(settings: Settings, store: Store) -> list[Callable[..., Any]]:
    """Activities of the surfaces (GitHub reporting) registered on the runs worker."""
    from bot.github.github_activities import github_activities

    return list(github_activities(settings, store))


def build_judge(settings: Settings) -> LlmJudge | None:
    """The LLM judge for `llm` criteria, or None (they are then "not judged") when no judge URL
    is set. The key comes from EVALBOT_JUDGE_API_KEY or the local secret store."""
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
    return LlmJudge(config)


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
def temporal_runtime() -> Runtime:
    """The process's Temporal runtime (one: each runtime has its own threads). The Rust core's
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
    return Runtime(telemetry=TelemetryConfig(logging=core_logs))


@contextlib.asynccontextmanager
async def session(
    settings: Settings, store: Store, *, run_workers: bool = True, roles: Sequence[str] = ROLES
) -> AsyncIterator[Session]:
    """A Temporal session with this process's workers (embedded dev server when unconfigured)."""
    provider = create_provider(settings)
    if run_workers:
        provider.check_host()  # HostUnsupported: one sentence, before the first cell
        # BlobStoreError: an unreachable or misconfigured bucket stops the worker here, not
        # mid-run with the outputs lost (docs/store.md, "Blobs")
        await asyncio.to_thread(open_blob_store(settings).check)
        provider.reap_orphans()  # what a worker killed mid-create left behind
    judge = build_judge(settings)
    try:
        async with engine_session(
            settings,
            provider,
            store,
            CaseGrader(judge),
            run_workers=run_workers,
            roles=roles,
            extra_activities=extra_activities(settings, store),
            secrets=functools.partial(resolve_run_secrets, settings),
            runtime=temporal_runtime(),
        ) as active:
            yield active
    finally:
        provider.close()
        if judge is not None:
            judge.close()
