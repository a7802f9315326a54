"""The bot end to end: webhook app over HTTP -> real Temporal dev server -> the engine (local
sandboxes) -> `publish_report` -> the fake GitHub. Nothing here is faked but GitHub itself."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from bot.app import create_app
from bot.composition import open_store, session
from bot.github.github_client import ClientOptions, GitHubClients
from bot.launcher import TemporalLauncher
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import REPO, pr_comment, pull_event, pull_json
from tests.fakes.github_server import FakeGitHub
from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from workflows.engine.devserver import DevServer
from workflows.engine.repos import commit_all
from workflows.settings import Settings
from workflows.store import Store

TIMEOUT_S = 240


@pytest.fixture
def agent_repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")


@pytest.fixture
def e2e_settings(
    tmp_path: Path, temporal_server: DevServer, github: FakeGitHub, bot_settings: Settings
) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return bot_settings.with_changes(
        data_dir=tmp_path / "evalbot",
        catalog_root=TINY_CATALOG,
        temporal={
            "address": temporal_server.address,
            "run_task_queue": f"runs-{suffix}",
            "collect_task_queue": f"collect-{suffix}",
            "score_task_queue": f"score-{suffix}",
        },
        sandbox={"poll_interval_s": 0.2},
    )


@pytest.fixture
def pr() -> int:
    """A PR number of this test's own: the dev server (and its experiment ids) is shared."""
    return 100 + uuid.uuid4().int % 1_000_000


def serve_pull(github: FakeGitHub, repo: AgentRepo, pr: int, **changes: Any) -> dict[str, Any]:
    pull = pull_json(**changes)
    pull["number"] = pr
    pull["head"]["sha"] = changes.get("head_sha", repo.head)
    pull["base"]["sha"] = repo.base
    return github.add_pull(pull, clone_url=str(repo.path))


class Bot:
    """The webhook app (its own event loop, its own Temporal client) and a signed sender."""

    def __init__(self, settings: Settings, store: Store) -> None:
        clients = GitHubClients(settings, options=ClientOptions.fast())
        launcher = TemporalLauncher(settings, store)  # connects inside the app's loop
        self.server = AppServer(create_app(settings, launcher, store, github=clients))

    async def deliver(self, event: str, payload: dict[str, Any], **kw: Any) -> dict[str, Any]:
        def post() -> dict[str, Any]:
            with httpx.Client(base_url=self.server.url, timeout=60) as client:
                response = Sender(client).deliver(event, payload, **kw)
                assert response.status_code == 200, response.text
                return dict(response.json())

        return await asyncio.to_thread(post)  # the test's loop keeps running the workers


@pytest.fixture
async def running(e2e_settings: Settings) -> AsyncIterator[tuple[Bot, Client, Store]]:
    store = open_store(e2e_settings)
    async with session(e2e_settings, store) as active:  # workers incl. publish_report
        bot = Bot(e2e_settings, store)
        with bot.server:
            yield bot, active.client, store
    store.close()


async def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def comment(github: FakeGitHub, pr: int, body: str, **who: str) -> dict[str, Any]:
    """A PR comment delivery for a comment that exists on the fake GitHub."""
    payload = pr_comment(body, **who)
    payload["issue"]["number"] = pr
    payload["comment"]["id"] = github.add_comment(REPO, pr, body, "Codertocat")["id"]
    return payload


def bot_comments(github: FakeGitHub, pr: int) -> list[dict[str, Any]]:
    return [c for c in github.comments_on(REPO, pr) if c["user"]["type"] == "Bot"]


async def experiments(client: Client, prefix: str) -> list[str]:
    query = f'WorkflowId STARTS_WITH "{prefix}" AND WorkflowType = "ExperimentWorkflow"'
    return sorted({w.id async for w in client.list_workflows(query)})


async def test_eval_comment_ends_with_one_report_comment_and_one_completed_check_run(
    running: tuple[Bot, Client, Store], github: FakeGitHub, agent_repo: AgentRepo, pr: int
) -> None:
    bot, client, _store = running
    serve_pull(github, agent_repo, pr)
    payload = comment(github, pr, "/eval tiny --trials 1 --cases consent-draft,sale-plans")

    first = await bot.deliver("issue_comment", payload, delivery="e2e-delivery")
    again = await bot.deliver("issue_comment", payload, delivery="e2e-delivery")
    assert first["action"] == "started" and again["action"] == "duplicate"
    (experiment_id,) = first["experiments"]

    await client.get_workflow_handle(experiment_id).result()
    # exactly one experiment for this head (the dev server is shared by the test session)
    mine = f"gh/{REPO}/pr{pr}/tiny/{agent_repo.head[:12]}"
    assert await experiments(client, mine) == [experiment_id]
    (report,) = bot_comments(github, pr)
    text = report["body"]
    assert "| criterion |" in text and "overall" in text
    assert agent_repo.head[:7] in text and agent_repo.base[:7] in text
    (check,) = github.check_runs_for(REPO)
    assert check["status"] == "completed" and check["conclusion"] in ("success", "neutral")
    assert check["head_sha"] == agent_repo.head and check["external_id"] == experiment_id
    assert github.reactions_on(payload["comment"]["id"]) == ["rocket"]

    status = await bot.deliver("issue_comment", comment(github, pr, "/eval status"))
    assert status["experiments"] == [experiment_id]
    assert "| 4/4 | finished |" in bot_comments(github, pr)[-1]["body"]
    rerun = await bot.deliver("issue_comment", comment(github, pr, "/eval rerun --failed tiny"))
    assert rerun == {"action": "rerun", "detail": "", "experiments": [experiment_id]}
    await client.get_workflow_handle(experiment_id).result()  # nothing failed: nothing reran
    assert len(github.check_runs_for(REPO)) == 1


async def test_outsiders_start_nothing_and_get_an_explanation(
    running: tuple[Bot, Client, Store], github: FakeGitHub, agent_repo: AgentRepo, pr: int
) -> None:
    bot, client, _store = running
    serve_pull(github, agent_repo, pr)
    outsider = await bot.deliver(
        "issue_comment", comment(github, pr, "/eval tiny", association="NONE", login="eve")
    )
    serve_pull(github, agent_repo, pr, fork=True)
    fork = await bot.deliver("issue_comment", comment(github, pr, "/eval tiny"))
    assert outsider["action"] == fork["action"] == "refused"
    # (the dev server is shared by the session: look for this test's head only)
    assert await experiments(client, f"gh/{REPO}/pr{pr}/tiny/{agent_repo.head[:12]}") == []
    eve, unapproved = (c["body"] for c in bot_comments(github, pr))
    assert "@eve" in eve and "write access" in eve
    assert "/eval approve" in unapproved


async def test_a_push_while_labelled_cancels_the_old_experiment(
    running: tuple[Bot, Client, Store], github: FakeGitHub, agent_repo: AgentRepo, pr: int
) -> None:
    bot, client, _store = running
    github.set_permission(REPO, "Codertocat", "write")
    serve_pull(github, agent_repo, pr, labels=["eval:tiny"])
    labelled = pull_event("labeled", label="eval:tiny", labels=["eval:tiny"])
    labelled["pull_request"] = github.pull(REPO, pr)
    started = await bot.deliver("pull_request", labelled)
    (old,) = started["experiments"]

    (agent_repo.path / "NOTES.md").write_text("a new push\n")
    new_head = commit_all(agent_repo.path, "a new push")
    push = pull_event("synchronize", labels=["eval:tiny"])
    push["pull_request"] = serve_pull(
        github, agent_repo, pr, head_sha=new_head, labels=["eval:tiny"]
    )
    pushed = await bot.deliver("pull_request", push)
    assert pushed["action"] == "started"
    new = next(i for i in pushed["experiments"] if i != old)
    assert old in pushed["experiments"]  # cancelled

    closed = pull_event("closed", labels=["eval:tiny"])
    closed["pull_request"] = github.pull(REPO, pr)
    assert new in (await bot.deliver("pull_request", closed))["experiments"]

    for experiment_id in (old, new):
        await client.get_workflow_handle(experiment_id).result()
    runs = {r["external_id"]: r for r in github.check_runs_for(REPO)}
    assert runs[old]["conclusion"] == "cancelled" and runs[new]["conclusion"] == "cancelled"
    (report,) = bot_comments(github, pr)
    assert new in report["body"] and "Cancelled" in report["body"]
    handle = client.get_workflow_handle(old)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert json.dumps(pushed)
