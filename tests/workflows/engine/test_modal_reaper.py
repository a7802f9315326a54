"""Reaping on Modal (workflows/engine/reaper.py): a worker SIGKILLed mid-run leaves its sandboxes
running on Modal; once their experiment is gone, the reaper — `evalbot modal reap` and the
schedule a worker creates — terminates them, and nothing a running experiment needs. Real engine
(Temporal dev server, worker processes), real `modal` SDK, the Modal test server's view."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import _register_commands, cli
from bot.composition import open_store
from tests.fakes.modal_server.fixture import ModalTestServer
from tests.support.agent_repo import TINY_CATALOG, AgentRepo
from tests.support.temporal import engine_settings_for
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, start_experiment
from workflows.engine.planning import plan_experiment
from workflows.engine.reaper import schedule_id
from workflows.settings import Settings

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture
def settings(tmp_path: Path, temporal_server: DevServer, modal_server: ModalTestServer) -> Settings:
    app = f"evalbot-reaper-{uuid.uuid4().hex[:8]}"
    return engine_settings_for(
        tmp_path / "evalbot",
        temporal_server,
        TINY_CATALOG,
        sandbox={"provider": "modal"},
        modal={"app_name": app},
        temporal={"heartbeat_timeout_s": 5},
    )


def environment(settings: Settings) -> dict[str, str]:
    """The worker's and the CLI's: this test's settings, the SDK pointed at the test server."""
    temporal = settings.temporal
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")},
        "EVALBOT_DATA_DIR": str(settings.data_dir),
        "EVALBOT_CATALOG_ROOT": str(settings.catalog_root),
        "EVALBOT_PROVIDER": "modal",
        "EVALBOT_MODAL_APP_NAME": settings.modal.app_name,
        "EVALBOT_TEMPORAL_ADDRESS": str(temporal.address),
        "EVALBOT_RUN_TASK_QUEUE": temporal.run_task_queue,
        "EVALBOT_COLLECT_TASK_QUEUE": temporal.collect_task_queue,
        "EVALBOT_SCORE_TASK_QUEUE": temporal.score_task_queue,
        "EVALBOT_PROVISION_TASK_QUEUE": temporal.provision_task_queue,
        "EVALBOT_POLL_INTERVAL_S": "0.2",
    }


def start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "worker"],
        env=environment(settings),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def alive_sandboxes(server: ModalTestServer, experiment: str) -> set[str]:
    found = set()
    for path in server.cloud.root.glob("sandboxes/*/meta.json"):
        meta: dict[str, Any] = json.loads(path.read_text())
        if meta["tags"].get("experiment") == experiment and meta["terminated_at"] is None:
            found.add(path.parent.name)
    return found


async def until(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def reap(settings: Settings, *flags: str) -> dict[str, Any]:
    _register_commands()
    done = CliRunner().invoke(cli, ["modal", "reap", "--json", *flags], env=environment(settings))
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.stdout))


async def test_a_killed_workers_sandboxes_are_reaped_once_their_experiment_is_gone(
    settings: Settings, agent_repo: AgentRepo, modal_server: ModalTestServer, tmp_path: Path
) -> None:
    slow = {"sleep_s": "60"}  # the agent is still running when its worker dies
    arms = [ArmSpec(name="head", ref="head", commit=agent_repo.head, config=slow)]
    spec = plan_experiment(settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=1)
    client = await connect(settings)
    log = tmp_path / "worker.log"
    worker = start_worker(settings, log)
    try:
        await start_experiment(client, settings, spec, max_parallel=8)
        cells = len(spec.cells())  # every cell's sandbox is up (a fixed wait was short under load)
        running = await until(
            lambda: (
                (alive := alive_sandboxes(modal_server, spec.experiment_id))
                and len(alive) == cells
                and alive
            ),
            120,
            "a sandbox for every cell",
        )

        # While the experiment runs, the reaper leaves its sandboxes alone.
        kept = await asyncio.to_thread(reap, settings, "--dry-run")
        assert set(kept["kept"]) >= running and not set(kept["terminated"]) & running

        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        await client.get_workflow_handle(spec.experiment_id).terminate("test: gone with its worker")
        orphans = alive_sandboxes(modal_server, spec.experiment_id)
        assert orphans == running  # Modal kept them: nobody will come back for them

        dry = await asyncio.to_thread(reap, settings, "--dry-run")
        assert (
            set(dry["terminated"]) >= orphans
            and alive_sandboxes(modal_server, spec.experiment_id) == orphans
        )
        reaped = await asyncio.to_thread(reap, settings)
        assert set(reaped["terminated"]) >= orphans and reaped["failed"] == []
        assert alive_sandboxes(modal_server, spec.experiment_id) == set()
        assert open_store(settings).list_runs(spec.experiment_id) == []  # nothing was recorded
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


async def test_the_workers_schedule_reaps_orphans(
    settings: Settings, agent_repo: AgentRepo, modal_server: ModalTestServer, tmp_path: Path
) -> None:
    """The schedule a modal worker creates at start runs the same pass (triggered here instead of
    waiting ten minutes)."""
    slow = {"sleep_s": "60"}
    arms = [ArmSpec(name="head", ref="head", commit=agent_repo.head, config=slow)]
    spec = plan_experiment(settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=1)
    client = await connect(settings)
    log = tmp_path / "worker.log"
    worker = start_worker(settings, log)
    try:
        await start_experiment(client, settings, spec, max_parallel=8)
        await until(lambda: alive_sandboxes(modal_server, spec.experiment_id), 120, "sandboxes")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        await client.get_workflow_handle(spec.experiment_id).terminate("test: gone with its worker")
        assert alive_sandboxes(modal_server, spec.experiment_id)

        worker = start_worker(settings, log)  # a fresh worker: it serves the schedule's passes
        schedule = client.get_schedule_handle(schedule_id(settings.temporal.run_task_queue))
        await schedule.trigger()
        await until(
            lambda: not alive_sandboxes(modal_server, spec.experiment_id), 120, "the reaping pass"
        )
        described = await schedule.describe()
        assert described.info.num_actions >= 1
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
