"""A delivery and its redelivery at two different `evalbot serve` processes sharing one database
(SQLite file, then PostgreSQL): the first attempt fails (GitHub is down), the redelivery at the
other process runs the `/eval` exactly once, and a third attempt is a duplicate everywhere."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.service import RPCError

from tests.bot.conftest import Sender
from tests.bot.payloads import NUMBER, REPO, SECRET, pull_json
from tests.bot.webhooks.test_comments import bot_replies, comment
from tests.conftest import FIXTURES
from tests.fakes.github_server import FakeGitHub
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect
from workflows.ports import free_port
from workflows.settings import Settings

START_TIMEOUT_S = 240  # a loaded CI machine imports slowly


class ServeProcess:
    """`python -m bot serve` (the web process alone, against the test's Temporal server)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self._log = log
        command = [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.process.poll() is None, self._log.read_text()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"serve did not start: {self._log.read_text()}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def serve_env(
    tmp_path: Path, github: FakeGitHub, temporal_server: DevServer, database_url: str
) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")} | {
        "EVALBOT_DATA_DIR": str(tmp_path / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(FIXTURES / "catalog"),
        "EVALBOT_DATABASE_URL": database_url,
        "EVALBOT_GITHUB_WEBHOOK_SECRET": SECRET,
        "EVALBOT_GITHUB_API_URL": github.base_url,
        "EVALBOT_GITHUB_APP_ID": str(github.app_id),
        "EVALBOT_GITHUB_PRIVATE_KEY": github.app_private_key,
        "EVALBOT_TEMPORAL_ADDRESS": temporal_server.address,
        "EVALBOT_RUN_TASK_QUEUE": f"runs-{suffix}",
        "EVALBOT_COLLECT_TASK_QUEUE": f"collect-{suffix}",
        "EVALBOT_SCORE_TASK_QUEUE": f"score-{suffix}",
        "EVALBOT_PROVISION_TASK_QUEUE": f"provision-{suffix}",
    }


@pytest.fixture
def two_processes(serve_env: dict[str, str], tmp_path: Path) -> Iterator[list[ServeProcess]]:
    processes = [ServeProcess(serve_env, tmp_path / f"serve-{n}.log") for n in "ab"]
    try:
        for process in processes:
            process.wait_ready()
        yield processes
    finally:
        for process in processes:
            process.stop()


async def experiment_queue(serve_env: dict[str, str], experiment_id: str) -> str | None:
    """The task queue of the experiment workflow with this id, None when none was started."""
    client = await connect(Settings(), serve_env["EVALBOT_TEMPORAL_ADDRESS"])
    try:
        description = await client.get_workflow_handle(experiment_id).describe()
    except RPCError:
        return None
    return description.task_queue


@pytest.mark.timeout(600)
async def test_a_failed_delivery_redelivered_to_another_process_runs_exactly_once(
    two_processes: list[ServeProcess], github: FakeGitHub, serve_env: dict[str, str]
) -> None:
    first, second = two_processes
    head = uuid.uuid4().hex + uuid.uuid4().hex[:8]  # an experiment id of this test's own
    github.add_pull(pull_json(head_sha=head))
    experiment = f"gh/{REPO}/pr{NUMBER}/tiny/{head[:12]}"
    payload = comment(github, "/eval tiny")
    github.fail("GET", rf"/pulls/{NUMBER}$", status=502, times=1000)  # down, retries and all
    with httpx.Client(base_url=first.url, timeout=60) as client:
        failed = Sender(client).deliver("issue_comment", payload, delivery="outage-1")
    assert failed.status_code == 503, failed.text
    github.recover()
    comment_id = payload["comment"]["id"]
    assert github.reactions_on(comment_id) == []
    with httpx.Client(base_url=second.url, timeout=60) as client:
        redelivered = Sender(client).deliver("issue_comment", payload, delivery="outage-1")
    assert redelivered.status_code == 200 and redelivered.json()["action"] == "started"
    for process in (first, second):  # handled: a duplicate at either process
        with httpx.Client(base_url=process.url, timeout=60) as client:
            again = Sender(client).deliver("issue_comment", payload, delivery="outage-1")
        assert again.json() == {"action": "duplicate", "delivery": "outage-1"}
    assert github.reactions_on(comment_id) == ["rocket"]  # acknowledged once, by one process
    assert bot_replies(github) == []
    assert redelivered.json()["experiments"] == [experiment]
    queue = serve_env["EVALBOT_RUN_TASK_QUEUE"]
    assert await experiment_queue(serve_env, experiment) == queue  # started, on Temporal
