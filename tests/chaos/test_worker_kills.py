"""SIGKILL the worker five times at random (seeded) points of a 200-cell experiment; a new worker
starts each time. The experiment completes with exactly one result per cell, every cell keeps the
status its agent earned, and the PR comment shows the stored results."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from bot.composition import open_store
from tests.chaos.conftest import PR, REPO
from tests.chaos.harness import (
    ChaosAgent,
    WorkerProcess,
    finish,
    outcome,
    plan,
    reporter,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from tests.support.experiments import wait_stored
from workflows.engine.engine_client import connect, start_experiment, wait_for
from workflows.settings import Settings

SEED = 20240610
KILLS = 5


@pytest.mark.timeout(420)
async def test_worker_sigkilled_five_times(
    settings: Settings, agent: ChaosAgent, github: FakeGitHub, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    spec = plan(settings, agent)
    cells = len(spec.cells())
    kill_at = sorted(rng.sample(range(cells // 20, cells * 6 // 10), KILLS))
    store = open_store(settings)
    client = await connect(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    killed_at: list[int] = []
    completed = False
    try:
        await start_experiment(client, settings, spec, reporter=reporter(REPO, PR), max_parallel=50)
        for threshold in kill_at:
            floor = (killed_at[-1] + cells // 40) if killed_at else 0
            await wait_stored(store, spec.experiment_id, max(threshold, floor), timeout_s=180)
            await asyncio.sleep(rng.uniform(0, 0.5))  # anywhere in a stage, not at a result
            killed_at.append(sum(store.count_runs(spec.experiment_id).values()))
            worker.kill()
            worker.start()
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=240)
        completed = True
    finally:
        snapshot, left = await finish(worker, settings, spec.experiment_id)

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
    # A worker killed mid-provision can leave a sandbox no teardown names (the retried provision
    # makes another): those, their uid claims and cgroups are tolerated, counted and bounded; a
    # live process, a mount or a staging folder is not.
    result.tolerated, result.orphaned = ("sandbox ", "uid claim ", "cgroup "), left
    orphans = len(snapshot.sandboxes) + len(snapshot.claims)
    record(
        "fault",
        "worker SIGKILL x5",
        faults_injected=len(killed_at),
        **result.figures(),
        detail=f"killed after {killed_at} of {cells} results; {result.duplicate_detail}",
    )
    assert len(killed_at) == KILLS and max(killed_at) < cells, killed_at  # all mid-experiment
    assert orphans <= KILLS * settings.sandbox.max_concurrent_runs, snapshot.items()
    result.check()
