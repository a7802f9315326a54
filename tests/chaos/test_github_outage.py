"""The bot end to end under a GitHub outage: `/eval chaos --trials 10` on a PR (webhook app over
HTTP -> Temporal -> a worker subprocess -> local sandboxes), then for a minute the fake GitHub
answers 500s and 503s and lets requests time out — before handling them, and after handling them
(so a retried write may land twice). The 200-cell experiment completes with exactly one result per
cell, every cell keeps the status its agent earned, and the PR ends with exactly one report comment
showing the stored results and one completed check run."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app import create_app
from bot.composition import open_store
from bot.github.github_client import ClientOptions, GitHubClients
from bot.launcher import TemporalLauncher
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import REPO, SECRET, pr_comment, pull_json
from tests.chaos.conftest import chaos_settings, new_github
from tests.chaos.harness import (
    CASES,
    TRIALS,
    ChaosAgent,
    WorkerProcess,
    finish,
    outcome,
    write_catalog,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, wait_for

OUTAGE_S = 60.0
CLIENT_TIMEOUT_S = 3
PR = 11


class FlakyGitHub(FakeGitHub):
    """The fake GitHub with an outage switch. While down, requests get in turn: a 500, a 503, no
    answer before the client's time-out (not handled), and no answer before the time-out although
    the request WAS handled (the write happened; the client cannot know)."""

    def __init__(self) -> None:
        super().__init__()
        self.down_until = 0.0
        self.failed = 0
        self._turn = itertools.count()

    def outage(self, seconds: float) -> None:
        self.down_until = time.monotonic() + seconds

    def handle(self, method: str, raw_path: str, headers: Any, body: bytes) -> Any:
        if time.monotonic() >= self.down_until:
            return super().handle(method, raw_path, headers, body)
        self.failed += 1
        turn = next(self._turn) % 4
        if turn < 2:
            return (500, 503)[turn], {"message": "Injected outage"}, {}
        hang = CLIENT_TIMEOUT_S + 1.0
        if turn == 2:
            time.sleep(hang)
            return 504, {"message": "Injected time-out"}, {}
        answer = super().handle(method, raw_path, headers, body)
        time.sleep(hang)
        return answer


@pytest.fixture
def flaky() -> Iterator[FlakyGitHub]:
    fake = new_github(FlakyGitHub())
    yield fake
    fake.stop()


def bot_comments(github: FakeGitHub) -> list[dict[str, Any]]:
    return [c for c in github.comments_on(REPO, PR) if c["user"]["type"] == "Bot"]


@pytest.mark.timeout(480)
async def test_github_outage_for_a_minute(
    agent: ChaosAgent, flaky: FlakyGitHub, temporal_server: DevServer, tmp_path: Path
) -> None:
    write_catalog(tmp_path / "catalog")
    settings = chaos_settings(tmp_path, temporal_server.address, flaky).with_changes(
        github={
            "webhook_secret": SECRET,
            "timeout_s": CLIENT_TIMEOUT_S,
            "max_trials": TRIALS,
            "max_cases": 10,
        },
    )
    pull = pull_json()
    pull["number"], pull["head"]["sha"], pull["base"]["sha"] = PR, agent.head, agent.base
    flaky.add_pull(pull, clone_url=str(agent.path))
    command = f"/eval chaos --trials {TRIALS}"
    payload = pr_comment(command)
    payload["issue"]["number"] = PR
    payload["comment"]["id"] = flaky.add_comment(REPO, PR, command, "Codertocat")["id"]
    store = open_store(settings)
    client = await connect(settings)
    app = create_app(
        settings,
        TemporalLauncher(settings, store),
        store,
        github=GitHubClients(settings, options=ClientOptions.fast()),
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    completed, experiment_id = False, ""
    try:
        with AppServer(app) as server:

            def deliver() -> httpx.Response:
                with httpx.Client(base_url=server.url, timeout=60) as http:
                    return Sender(http).deliver("issue_comment", payload)

            answer = await asyncio.to_thread(deliver)
        assert answer.status_code == 200 and answer.json()["action"] == "started", answer.text
        (experiment_id,) = answer.json()["experiments"]
        flaky.outage(OUTAGE_S)  # from here on the experiment runs while GitHub is down
        await asyncio.wait_for(wait_for(client, experiment_id), timeout=360)
        completed = True
    finally:
        snapshot, left = await finish(worker, settings, experiment_id)
    record_ = store.get_experiment(experiment_id)
    assert record_ is not None
    spec = record_.spec
    result = await outcome(
        client,
        store,
        flaky,
        spec,
        (REPO, PR),
        completed=completed,
        snapshot=snapshot,
        blob_dir=settings.blob_dir,
    )
    result.orphaned = left
    comments = bot_comments(flaky)

    record(
        "fault",
        f"GitHub 500s/503s/time-outs for {OUTAGE_S:.0f} s (bot end to end)",
        faults_injected=1,
        **result.figures(),
        detail=f"{flaky.failed} GitHub requests failed; {len(comments)} bot comment(s) at the end",
    )
    assert len(spec.cells()) == CASES * 2 * TRIALS
    assert flaky.failed >= 4  # the outage was felt
    assert len(comments) == 1, [c["body"][:80] for c in comments]
    result.check()
