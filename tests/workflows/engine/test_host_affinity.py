"""Host affinity (docs/engine.md, "Host queues"): with several worker hosts, a run's execute,
collect and teardown go to the host that provisioned its sandbox; when that host is gone, the run
is provisioned again on another host and never attached on the lost one; the lost host removes
what it left when its worker starts again.

Two "hosts" in this process: separate data folders, providers and host ids, one store and one
blob folder (as a cluster shares them). Host B "dies" by running without its host-queue worker:
what it provisions, nobody executes."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from bot.composition import open_store
from tests.support.agent_repo import TINY_CATALOG, AgentRepo
from tests.support.temporal import engine_settings_for, replay_in_sandbox
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.devserver import DevServer
from workflows.engine.embedded import reap_host, running_workers
from workflows.engine.engine_client import (
    connect,
    host_queue,
    run_executions,
    start_experiment,
    wait_for,
)
from workflows.engine.grading import CaseGrader
from workflows.engine.planning import plan_experiment
from workflows.engine.worker import build_workers
from workflows.providers import create_provider
from workflows.providers.base import SandboxProvider
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store import Store

HOST_STAGES = ("execute", "collect", "teardown")


def two_hosts(tmp_path: Path, server: DevServer) -> tuple[Settings, Settings]:
    a = engine_settings_for(
        tmp_path / "host-a",
        server,
        TINY_CATALOG,
        temporal={"host_affinity": True, "host_id": "a", "host_lost_s": 2},
        store={"blob_url": f"file://{tmp_path / 'blobs'}"},
    )
    b = a.with_changes(data_dir=tmp_path / "host-b", temporal={"host_id": "b"})
    return a, b


def plan(settings: Settings, repo: AgentRepo) -> ExperimentSpec:
    arms = [
        ArmSpec(name="base", ref="base", commit=repo.base),
        ArmSpec(name="head", ref="head", commit=repo.head),
    ]
    return plan_experiment(settings, repo=str(repo.path), dataset="tiny", arms=arms, trials=1)


def workers(
    client: Client, settings: Settings, provider: SandboxProvider, store: Store, *, dead: bool
) -> Sequence[Worker]:
    """A host's workers; a `dead` host's host queue has no worker: its sandboxes are lost."""
    built = build_workers(client, settings, provider, store, CaseGrader(None))
    return [w for w in built if not (dead and w.task_queue == host_queue(settings))]


async def until(condition: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def host_stage_queues(client: Client, spec: ExperimentSpec) -> Counter[tuple[str, str]]:
    """(activity, task queue) of every host-bound stage the experiment's run workflows scheduled."""
    seen: Counter[tuple[str, str]] = Counter()
    for workflow_id, _ in await run_executions(client, spec.experiment_id):
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name in HOST_STAGES:
                seen[(scheduled.activity_type.name, scheduled.task_queue.name)] += 1
    return seen


async def test_runs_provisioned_on_a_lost_host_run_again_on_another(
    tmp_path: Path, temporal_server: DevServer, agent_repo: AgentRepo
) -> None:
    a, b = two_hosts(tmp_path, temporal_server)
    store, client = open_store(a), await connect(a)
    host_a, host_b = create_provider(a), create_provider(b)
    spec = plan(a, agent_repo)

    async def b_holds_sandboxes() -> bool:
        return len(await host_b.run_sandboxes()) >= 2

    # B alone takes the experiment and provisions; then B dies and A comes up
    async with running_workers(workers(client, b, host_b, store, dead=True)):
        await start_experiment(client, a, spec, max_parallel=4)
        await until(b_holds_sandboxes)
    try:
        async with running_workers(workers(client, a, host_a, store, dead=False)):
            await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=120)
            on_b = {s.run for s in await host_b.run_sandboxes()}
        await check_moved_to_a(client, spec, store, a, b, on_b)
    finally:
        await reap_host(host_b, client)  # B's worker starting again: its leftovers go
    assert await host_b.run_sandboxes() == []
    assert sorted(p.name for p in b.sandbox_dir.iterdir() if not p.name.startswith(".")) == []
    executions = await run_executions(client, spec.experiment_id)
    replayed = await replay_in_sandbox(client, [spec.experiment_id, *(w for w, _ in executions)])
    assert replayed.replay_failures == {}


async def check_moved_to_a(
    client: Client, spec: ExperimentSpec, store: Store, a: Settings, b: Settings, on_b: set[str]
) -> None:
    queue_a, queue_b = host_queue(a), host_queue(b)

    runs = store.list_runs(spec.experiment_id)
    assert Counter(r.run_id for r in runs) == Counter(c.run_id for c in spec.cells())
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    assert on_b and on_b <= {c.run_id for c in spec.cells()}
    stages = await host_stage_queues(client, spec)
    # B's runs were sent to B's queue once each, never collected nor torn down there (never
    # attached on B); every run executed, collected and torn down on A
    assert stages[("execute", queue_b)] >= len(on_b)
    assert stages[("collect", queue_b)] == stages[("teardown", queue_b)] == 0
    cells = len(spec.cells())
    assert [stages[(stage, queue_a)] for stage in HOST_STAGES] == [cells] * 3, stages
    assert await create_provider(a).run_sandboxes() == []


async def test_a_run_whose_hosts_are_all_lost_is_an_infrastructure_error(
    tmp_path: Path, temporal_server: DevServer, agent_repo: AgentRepo
) -> None:
    _, b = two_hosts(tmp_path, temporal_server)
    b = b.with_changes(temporal={"host_lost_s": 1})
    store, client = open_store(b), await connect(b)
    host_b = create_provider(b)
    spec = plan(b, agent_repo)
    async with running_workers(workers(client, b, host_b, store, dead=True)):
        await start_experiment(client, b, spec, max_parallel=10)
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=120)
    try:
        runs = store.list_runs(spec.experiment_id)
        assert len(runs) == len(spec.cells())
        assert {r.status for r in runs} == {RunStatus.SANDBOX_ERROR}
        assert {r.error for r in runs} == {
            f"worker host lost: no worker of {host_queue(b)} took the run's stage "
            "(after 2 sandboxes)"
        }
        # the second sandbox of a run removed the first (same host, `provision`): one left each
        assert len(await host_b.run_sandboxes()) == len(spec.cells())
    finally:
        await reap_host(host_b, client)
    assert await host_b.run_sandboxes() == []
