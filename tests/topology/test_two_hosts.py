"""Two worker hosts, one experiment (docs/engine.md, "Host queues"): separate `evalbot worker`
processes with separate data folders, one Temporal dev server, one PostgreSQL, one S3 server
(moto). A 200-cell experiment on the local provider (100 cases x 2 arms x 1 trial, the fault
tests' trivial agent, one criterion); host B is SIGKILLed once it holds sandboxes of the
experiment and results are coming in.

The experiment completes; every cell has exactly one result, produced once (counted in the store
and in Temporal's history) with the status its agent earned; every output is readable through
host A's blob store (S3); the PR comment the workflow posted is the report computed from the
store; and neither host keeps anything of the experiment: A at once, B once its worker starts
again (it removes the sandboxes of runs that moved to A while it was gone)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from bot.composition import open_store
from bot.identity import HEAD_ARM
from tests.chaos.conftest import PR, REPO, chaos_settings
from tests.chaos.evidence import HostSnapshot, completions_per_cell, snapshot_host
from tests.chaos.harness import (
    WorkerProcess,
    bot_comments,
    clean_up_sandboxes,
    expected_comment,
    expected_status,
    plan,
    reporter,
    write_agent,
    write_catalog,
)
from tests.fakes.github_server import FakeGitHub
from workflows.blobs import open_blob_store
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, host_queue, start_experiment, wait_for
from workflows.records import RunResult, RunStatus
from workflows.settings import Settings
from workflows.store import Store

CASES = 100  # x 2 arms x 1 trial = 200 cells
HOST_LOST_S = 10


def host_settings(
    root: Path, server: DevServer, github: FakeGitHub, database_url: str, blobs: dict[str, Any]
) -> tuple[Settings, Settings]:
    """Host A's and host B's settings: the same cluster, store, bucket and queues; their own
    data folders and host ids."""
    a = chaos_settings(
        root,
        server.address,
        github,
        data_dir=root / "host-a",
        temporal={
            "heartbeat_timeout_s": 8,
            "host_affinity": True,
            "host_id": "a",
            "host_lost_s": HOST_LOST_S,
        },
        store={"database_url": database_url, **blobs["store"]},
    )
    b = a.with_changes(data_dir=root / "host-b", temporal={"host_id": "b"})
    return a, b


async def polled(client: Client, queue: str, timeout_s: float = 90) -> None:
    """Wait until a worker polls `queue` for activities (a worker process is up)."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    deadline = time.monotonic() + timeout_s
    while not (await client.workflow_service.describe_task_queue(request)).pollers:
        assert time.monotonic() < deadline, f"no worker polls {queue}"
        await asyncio.sleep(0.5)


async def until(check: Any, what: str, timeout_s: float, left: Any = None) -> None:
    """Wait for `check()`; on timeout say what `left()` still finds."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() >= deadline:
            detail = f": {left()}" if left is not None else ""
            raise AssertionError(f"timed out waiting for {what}{detail}")
        await asyncio.sleep(0.2)


def on_host(snapshot: HostSnapshot, other: HostSnapshot) -> list[str]:
    """A host's leftovers, when both "hosts" share this machine's cgroup tree: the cgroups of
    the other host's sandboxes (named by sandbox id) are not this host's."""
    others = set(other.sandboxes)
    return [
        item
        for item in snapshot.items()
        if not (item.startswith("cgroup ") and Path(item.split(" ", 1)[1]).name in others)
    ]


def unreadable_outputs(a: Settings, runs: list[RunResult]) -> list[str]:
    """Runs whose outputs host A cannot read from the blob store, or whose answer is not the
    one their arm's agent wrote (head answers 42, base 41)."""
    blobs = open_blob_store(a)
    wrong = []
    for run in runs:
        transcript = blobs.read_range(run.outputs_ref, "out/transcript.jsonl", 0, 4096)
        if not run.outputs_ref or transcript is None or b"finish" not in transcript:
            wrong.append(f"{run.run_id}: no transcript under {run.outputs_ref!r}")
        if run.status is RunStatus.SCORED:
            answer = blobs.read_range(run.outputs_ref, "out/answer.md", 0, 4096) or b""
            if (b"answer is 42" in answer) != (run.arm == HEAD_ARM):
                wrong.append(f"{run.run_id}: answer {answer!r}")
    return wrong


@pytest.mark.postgres
@pytest.mark.timeout(600)
async def test_two_hosts_one_killed_mid_run(
    tmp_path: Path,
    temporal_server: DevServer,
    postgres_url: str,
    s3_bucket: dict[str, Any],
    github: FakeGitHub,
) -> None:
    a, b = host_settings(tmp_path, temporal_server, github, postgres_url, s3_bucket)
    write_catalog(a.catalog_root, cases=CASES)
    agent = write_agent(tmp_path / "agent", sleep_s=0.2)
    spec = plan(a, agent, trials=1)
    cells = {cell.run_id for cell in spec.cells()}
    assert len(cells) == 2 * CASES
    store: Store = open_store(a)
    client = await connect(a)
    host_a = WorkerProcess(a, tmp_path / "host-a.log")
    host_b = WorkerProcess(b, tmp_path / "host-b.log")
    try:
        host_a.start()
        host_b.start()
        await asyncio.gather(polled(client, host_queue(a)), polled(client, host_queue(b)))
        await start_experiment(client, a, spec, reporter=reporter(REPO, PR), max_parallel=40)

        async def b_busy_mid_run() -> bool:
            stored = sum(store.count_runs(spec.experiment_id).values())
            return len(snapshot_host(b, spec.experiment_id).sandboxes) >= 3 and stored >= 20

        await until(b_busy_mid_run, "host B to hold sandboxes mid-run", timeout_s=240)
        held_by_b = len(snapshot_host(b, spec.experiment_id).sandboxes)
        stored_at_kill = sum(store.count_runs(spec.experiment_id).values())
        host_b.kill()  # SIGKILL, its whole process group
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=420)

        # checked before any clean-up: A keeps nothing, B's leftovers are still there
        left_on_b_dead = snapshot_host(b, spec.experiment_id)
        left_on_a = on_host(snapshot_host(a, spec.experiment_id), left_on_b_dead)
        host_b.start()  # B's worker again: it removes what runs re-provisioned on A left there

        def left_on_b_now() -> list[str]:
            return snapshot_host(b, spec.experiment_id).items()

        async def b_clean() -> bool:
            return left_on_b_now() == []

        await until(b_clean, "host B to remove its leftovers", 120, left_on_b_now)
        left_on_b = snapshot_host(b, spec.experiment_id)
    finally:
        host_a.kill()
        host_b.kill()
        await clean_up_sandboxes(a)
        await clean_up_sandboxes(b)

    assert stored_at_kill < len(cells) and held_by_b >= 3
    runs = store.list_runs(spec.experiment_id)
    # the store keeps one row per run id whatever happened, so duplicates are counted where they
    # happen: result-producing completions in Temporal's history
    assert {run.run_id for run in runs} == cells
    produced = await completions_per_cell(client, spec.experiment_id)
    assert set(produced) == cells and set(produced.values()) == {1}, produced.most_common(3)
    wrong = [r.run_id for r in runs if r.status is not expected_status(r.run_id)]
    assert wrong == [], [(r.run_id, r.status, r.error) for r in runs if r.run_id in wrong][:5]
    assert unreadable_outputs(a, runs) == []
    comments = [c["body"] for c in bot_comments(github, REPO, PR)]
    assert comments == [expected_comment(spec, runs)]
    assert left_on_a == [], left_on_a
    assert left_on_b_dead.sandboxes != []  # B died holding sandboxes, which its restart removed
    # cgroups are the machine's: none of either host's; every uid claim and staged file is gone
    assert left_on_b.items() == []
