"""Kill the Temporal dev server (SIGKILL) twice at random (seeded) points of a 200-cell experiment
and start it again on the same port and database file. The worker subprocess and the test's client
are not restarted: the SDK reconnects on its own. The experiment completes with exactly one result
per cell, every cell keeps the status its agent earned, and the PR comment shows the results."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from bot.composition import open_store
from tests.chaos.conftest import PR, REPO, chaos_settings
from tests.chaos.evidence import snapshot_host
from tests.chaos.harness import (
    ChaosAgent,
    WorkerProcess,
    clean_up_sandboxes,
    outcome,
    plan,
    reporter,
    write_catalog,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from tests.support.experiments import wait_stored
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, start_experiment, wait_for
from workflows.ports import free_port

SEED = 7321
RESTARTS = 2


@pytest.mark.timeout(420)
async def test_temporal_server_killed_and_restarted(
    agent: ChaosAgent, github: FakeGitHub, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    server = DevServer(db_file=tmp_path / "temporal" / "temporal.db", port=free_port()).start()
    write_catalog(tmp_path / "catalog")
    settings = chaos_settings(tmp_path, server.address, github)
    spec = plan(settings, agent)
    cells = len(spec.cells())
    restart_at = sorted(rng.sample(range(cells // 10, cells * 4 // 5), RESTARTS))
    store = open_store(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    killed_at: list[int] = []
    worker_survived = True
    completed = False
    try:
        client = await connect(settings)
        await start_experiment(client, settings, spec, reporter=reporter(REPO, PR), max_parallel=50)
        for threshold in restart_at:
            await wait_stored(store, spec.experiment_id, threshold, timeout_s=180)
            await asyncio.sleep(rng.uniform(0, 0.5))
            killed_at.append(sum(store.count_runs(spec.experiment_id).values()))
            server.kill()
            await asyncio.sleep(rng.uniform(1, 3))  # down for a moment, runs keep running
            await asyncio.to_thread(server.start)  # same port, same database file
            worker_survived &= worker.alive()
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=240)
        completed = True
        snapshot = snapshot_host(settings, spec.experiment_id)  # before any clean-up
        result = await outcome(
            client,
            store,
            github,
            spec,
            (REPO, PR),
            completed=completed,
            snapshot=snapshot,
            blob_dir=settings.blob_dir,
        )
    finally:
        worker.kill()
        left = await clean_up_sandboxes(settings)
        server.stop()
    result.orphaned = left

    record(
        "fault",
        "Temporal dev server SIGKILL + restart x2",
        faults_injected=len(killed_at),
        **result.figures(),
        detail=f"killed after {killed_at} of {cells} results; worker kept: {worker_survived}",
    )
    assert worker_survived and worker.starts == 1  # the SDK reconnected, no restart needed
    assert len(killed_at) == RESTARTS and max(killed_at) < cells
    result.check()
