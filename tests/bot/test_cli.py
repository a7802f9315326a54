"""`evalbot github-event` (the GitHub Actions path) and `evalbot serve` start-up errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from click.testing import CliRunner
from pydantic import SecretStr
from temporalio.client import Client

from bot.commands.bot import github_event_command, serve_command
from tests.bot.payloads import HEAD_SHA, NUMBER, REPO, pr_comment
from tests.fakes.github_server import FakeGitHub
from workflows.engine.devserver import DevServer
from workflows.settings import Settings


def test_github_event_submits_the_request_to_temporal(
    tmp_path: Path, github: FakeGitHub, bot_settings: Settings, temporal_server: DevServer
) -> None:
    github.add_token("ghs_actions", "github-actions[bot]")
    settings = bot_settings.model_copy(
        update={
            "github_token": SecretStr("ghs_actions"),
            "github_bot_login": "github-actions[bot]",
            "temporal_address": temporal_server.address,
            "run_task_queue": f"nobody-listens-{uuid.uuid4().hex[:8]}",
        }
    )
    event = tmp_path / "event.json"
    event.write_text(json.dumps(pr_comment("/eval tiny --trials 1")))
    args = ["--name", "issue_comment", "--payload", str(event), "--delivery", "run-1"]

    result = CliRunner().invoke(github_event_command, args, obj=settings)
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.output)
    experiment_id = f"gh/{REPO}/pr{NUMBER}/tiny/{HEAD_SHA[:12]}"
    assert outcome == {"action": "started", "detail": "", "experiments": [experiment_id]}
    again = CliRunner().invoke(github_event_command, args, obj=settings)
    assert json.loads(again.output) == [{"action": "duplicate", "delivery": "run-1"}]

    async def check_and_clean_up() -> None:
        client = await Client.connect(temporal_server.address)
        handle = client.get_workflow_handle(experiment_id)
        assert (await handle.describe()).task_queue == settings.run_task_queue
        await handle.terminate("test over")

    asyncio.run(check_and_clean_up())


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
