"""`evalbot github-event` (the GitHub Actions path) and `evalbot serve` start-up errors."""

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

import httpx
import pytest
from click.testing import CliRunner
from pydantic import SecretStr
from temporalio.client import Client

from bot.commands.bot import github_event_command, serve_command
from tests.bot.conftest import Sender
from tests.bot.payloads import NUMBER, REPO, SECRET, load, pr_comment, pull_json
from tests.conftest import FIXTURES
from tests.fakes.github_server import FakeGitHub
from workflows.engine.devserver import DevServer
from workflows.ports import free_port
from workflows.settings import Settings


def test_github_event_submits_the_request_to_temporal(
    tmp_path: Path, github: FakeGitHub, bot_settings: Settings, temporal_server: DevServer
) -> None:
    github.add_token("ghs_actions", "github-actions[bot]")
    head = fresh_head(github)
    settings = bot_settings.with_changes(
        github={"token": SecretStr("ghs_actions"), "bot_login": "github-actions[bot]"},
        temporal={
            "address": temporal_server.address,
            "run_task_queue": f"nobody-listens-{uuid.uuid4().hex[:8]}",
        },
    )
    event = tmp_path / "event.json"
    event.write_text(json.dumps(pr_comment("/eval tiny --trials 1")))
    args = ["--name", "issue_comment", "--payload", str(event), "--delivery", "run-1"]

    result = CliRunner().invoke(github_event_command, args, obj=settings)
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.output)
    experiment_id = f"gh/{REPO}/pr{NUMBER}/tiny/{head[:12]}"
    assert outcome == {"action": "started", "detail": "", "experiments": [experiment_id]}
    again = CliRunner().invoke(github_event_command, args, obj=settings)
    assert json.loads(again.output) == [{"action": "duplicate", "delivery": "run-1"}]

    async def check_and_clean_up() -> None:
        client = await Client.connect(temporal_server.address)
        handle = client.get_workflow_handle(experiment_id)
        assert (await handle.describe()).task_queue == settings.temporal.run_task_queue
        await handle.terminate("test over")

    asyncio.run(check_and_clean_up())


def fresh_head(github: FakeGitHub) -> str:
    """A head SHA of this test's own: the Temporal dev server is shared by the session."""
    head = uuid.uuid4().hex + "0" * 8
    github.add_pull(pull_json(head_sha=head))
    return head


def test_github_event_errors_are_one_sentence(tmp_path: Path, bot_settings: Settings) -> None:
    event = tmp_path / "event.json"
    event.write_text("[1]")
    args = ["--name", "issue_comment", "--payload", str(event)]
    result = CliRunner().invoke(github_event_command, args, obj=bot_settings)
    assert result.exit_code == 2
    assert result.output.strip().endswith("is not a JSON object")
    event.write_text(json.dumps(pr_comment("/eval tiny")))
    result = CliRunner().invoke(github_event_command, args, obj=bot_settings)
    assert result.exit_code == 2 and "EVALBOT_TEMPORAL_ADDRESS is not set" in result.output


def test_serve_refuses_to_start_without_a_webhook_secret(tmp_path: Path) -> None:
    result = CliRunner().invoke(serve_command, [], obj=Settings(data_dir=tmp_path))
    assert result.exit_code == 2
    assert "EVALBOT_GITHUB_WEBHOOK_SECRET is not set" in result.output


@pytest.mark.parametrize("processes", [1, 2])
def test_serve_answers_signed_webhooks_and_hands_off_to_temporal(
    tmp_path: Path, github: FakeGitHub, temporal_server: DevServer, processes: int
) -> None:
    """`evalbot serve` as a real process: settings from the environment, like production."""
    port, queue = free_port(), f"nobody-listens-{uuid.uuid4().hex[:8]}"
    fresh_head(github)
    env = {
        **os.environ,
        "EVALBOT_DATA_DIR": str(tmp_path / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(FIXTURES / "catalog"),
        "EVALBOT_GITHUB_WEBHOOK_SECRET": SECRET,
        "EVALBOT_GITHUB_API_URL": github.base_url,
        "EVALBOT_GITHUB_APP_ID": str(github.app_id),
        "EVALBOT_GITHUB_PRIVATE_KEY": github.app_private_key,
        "EVALBOT_TEMPORAL_ADDRESS": temporal_server.address,
        "EVALBOT_RUN_TASK_QUEUE": queue,
    }
    command = [sys.executable, "-m", "bot", "serve", "--port", str(port)]
    command += ["--processes", str(processes)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            wait_until_up(client, server)
            sender = Sender(client)
            assert sender.deliver("ping", load("ping")).json()["action"] == "pong"
            payload = pr_comment("/eval tiny --trials 1")
            started = sender.deliver("issue_comment", payload, delivery="serve-1")
            assert started.json()["action"] == "started", started.text
            (experiment_id,) = started.json()["experiments"]
            for _ in range(2):  # with two processes, the other one may answer: still recorded
                again = sender.deliver("issue_comment", payload, delivery="serve-1")
                assert again.json()["action"] == "duplicate"
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, output
    assert github.app_private_key not in output and SECRET not in output

    async def check_and_clean_up() -> None:
        client = await Client.connect(temporal_server.address)
        handle = client.get_workflow_handle(experiment_id)
        assert (await handle.describe()).task_queue == queue
        await handle.terminate("test over")

    asyncio.run(check_and_clean_up())


def test_serve_dashboard_only_needs_no_github_setting(
    tmp_path: Path, temporal_server: DevServer
) -> None:
    """What the demo tells users to run: the dashboard on a local store, no webhook."""
    port = free_port()
    env = {
        name: value for name, value in os.environ.items() if not name.startswith("EVALBOT_GITHUB")
    }
    env |= {
        "EVALBOT_DATA_DIR": str(tmp_path / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(FIXTURES / "catalog"),
        "EVALBOT_TEMPORAL_ADDRESS": temporal_server.address,
        "EVALBOT_DASHBOARD_TOKEN": "a-local-token-for-this-test",
    }
    command = [sys.executable, "-m", "bot", "serve", "--port", str(port), "--dashboard-only"]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            wait_until_up(client, server)
            assert client.get("/dashboard/login").status_code == 200
            assert client.get("/dashboard/", follow_redirects=False).status_code == 401
            signed_in = {"Authorization": "Bearer a-local-token-for-this-test"}
            assert client.get("/dashboard/", headers=signed_in).status_code == 200
            assert client.post("/github/webhook", content=b"{}").status_code == 404
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, output
    assert "/dashboard (no webhook)" in output and "a-local-token-for-this-test" not in output


def wait_until_up(client: httpx.Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, server.communicate()[0].decode()
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("evalbot serve did not come up")
