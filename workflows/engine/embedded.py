"""One-machine defaults: with no Temporal address configured, start the dev server on demand and
run the workers in this process for as long as the session lasts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import Worker

from workflows.engine.activities import Grader, RunStore
from workflows.engine.devserver import embedded_server
from workflows.engine.engine_client import connect, stage_queues
from workflows.engine.reaper import ensure_reaper_schedule, reap
from workflows.engine.telemetry import EngineMetrics
from workflows.engine.worker import ROLES, build_workers
from workflows.providers.base import SandboxProvider
from workflows.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Session:
    client: Client
    address: str
    embedded: bool


@contextlib.asynccontextmanager
async def running_workers(workers: Sequence[Worker]) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        yield
    finally:  # each lets its activities finish for temporal.graceful_shutdown_s, at once
        await asyncio.gather(*(worker.shutdown() for worker in workers), return_exceptions=True)
        await asyncio.gather(*tasks, return_exceptions=True)


async def reap_host(provider: SandboxProvider, client: Client) -> None:
    """A host starting again removes the sandboxes it holds for experiments that are no longer
    running: runs re-provisioned elsewhere while it was gone (docs/engine.md, "Host queues")."""
    report = await reap(provider, client)
    if report.terminated or report.failed:
        log.warning("evalbot: host start: removed %d leftover sandboxes", len(report.terminated))
    for failure in report.failed:
        log.warning("evalbot: host start: could not remove %s", failure)


@contextlib.asynccontextmanager
async def engine_session(
    settings: Settings,
    provider: SandboxProvider,
    store: RunStore,
    grader: Grader,
    *,
    run_workers: bool = True,
    roles: Sequence[str] = ROLES,
    extra_activities: Sequence[Callable[..., Any]] = (),
    secrets: Any = None,
    runtime: Runtime | None = None,
    metrics: EngineMetrics | None = None,
) -> AsyncIterator[Session]:
    """A connected client, plus the dev server and in-process workers when embedded. The client
    and the workers run on `runtime` (the SDK's default when None); the activities count into
    `metrics`."""
    server = None if settings.temporal.address else embedded_server(settings.data_dir)
    if server is not None:
        await asyncio.to_thread(server.start)
    try:
        address = server.address if server else str(settings.temporal.address)
        client = await connect(settings, address, runtime=runtime)
        session = Session(client=client, address=address, embedded=server is not None)
        if not (run_workers or server):
            yield session
            return
        workers = build_workers(
            client, settings, provider, store, grader,
            roles=roles, extra_activities=extra_activities, secrets=secrets, metrics=metrics,
        )  # fmt: skip
        if "runs" in roles and not provider.quick_provision:
            await ensure_reaper_schedule(client, stage_queues(settings).runs)
        if "runs" in roles and settings.temporal.host_affinity and provider.host_bound:
            await reap_host(provider, client)
        async with running_workers(workers):
            yield session
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
