"""SIGKILL the worker in the middle of an experiment; a new worker finishes it with exactly one
stored result per cell: none lost, none duplicated."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from bot.composition import open_store
from tests.support.agent_repo import AgentRepo
from workflows.catalog.models import ArmSpec
from workflows.engine.engine_client import connect, start_experiment, wait_for
from workflows.engine.planning import plan_experiment
from workflows.providers.common.sandbox_layout import ID_PATTERN
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store import Store


def start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "EVALBOT_DATA_DIR": str(settings.data_dir),
        "EVALBOT_CATALOG_ROOT": str(settings.catalog_root),
        "EVALBOT_TEMPORAL_ADDRESS": str(settings.temporal.address),
        "EVALBOT_RUN_TASK_QUEUE": settings.temporal.run_task_queue,
        "EVALBOT_COLLECT_TASK_QUEUE": settings.temporal.collect_task_queue,
        "EVALBOT_SCORE_TASK_QUEUE": settings.temporal.score_task_queue,
        "EVALBOT_POLL_INTERVAL_S": str(settings.sandbox.resolved_poll_interval_s),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "worker"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


async def wait_until_scored(store: Store, experiment_id: str, at_least: int) -> int:
    for _ in range(600):
        done = sum(store.count_runs(experiment_id).values())
        if done >= at_least:
            return done
        await asyncio.sleep(0.1)
    raise AssertionError(f"fewer than {at_least} cells finished")


async def test_sigkilled_worker_loses_and_duplicates_nothing(
    engine_settings: Settings, agent_repo: AgentRepo, tmp_path: Path
) -> None:
    settings = engine_settings.with_changes(temporal={"heartbeat_timeout_s": 5})
    slow = {"sleep_s": "1.5"}
    arms = [
        ArmSpec(name="base", ref="base", commit=agent_repo.base, config=slow),
        ArmSpec(name="head", ref="head", commit=agent_repo.head, config=slow),
    ]
    spec = plan_experiment(settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=2)
    store = open_store(settings)
    client = await connect(settings)
    log = tmp_path / "worker.log"
    worker = start_worker(settings, log)
    try:
        await start_experiment(client, settings, spec, max_parallel=4)
        finished_before_kill = await wait_until_scored(store, spec.experiment_id, at_least=3)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        assert finished_before_kill < len(spec.cells())  # killed mid-experiment
        worker = start_worker(settings, log)
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=300)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    runs = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in runs) == sorted(c.run_id for c in spec.cells())
    assert [r for r in runs if r.status is not RunStatus.SCORED] == []
    # the killed worker's sandboxes were torn down or terminated as leftovers when re-provisioned
    assert [f.name for f in settings.sandbox_dir.iterdir() if ID_PATTERN.fullmatch(f.name)] == []
