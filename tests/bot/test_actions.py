"""`evalbot action` (Actions-only mode): GitHub's real event payloads, written to a file as the
runner writes them, handled by the CLI with the job's own engine (a real Temporal dev server,
the worker in the command's process, the `process` provider) and reported to the fake GitHub."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client

from bot.actions import ACTIONS_BOT_LOGIN, actions_settings
from bot.commands.bot import action_command
from bot.github.report_comment import marker
from tests.bot.payloads import REPO, pr_comment, pull_event, pull_json
from tests.fakes.github_server import FakeGitHub
from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from tests.support.temporal import engine_settings_for
from workflows.engine.devserver import DevServer
from workflows.engine.repos import commit_all
from workflows.settings import Settings

TOKEN = "ghs_workflow_token"
CASE = "consent-draft"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """The tiny catalog cut to one case and one trial: each labelled run is two cells."""
    root = tmp_path / "catalog"
    shutil.copytree(TINY_CATALOG, root)
    dataset = root / "datasets" / "tiny"
    for case in (dataset / "cases").iterdir():
        if case.name != CASE:
            shutil.rmtree(case)
    toml = dataset / "dataset.toml"
    toml.write_text(toml.read_text().replace("default_trials = 2", "default_trials = 1"))
    other = root / "datasets" / "tiny-b"
    shutil.copytree(dataset, other)
    (other / "dataset.toml").write_text(toml.read_text().replace('"tiny"', '"tiny-b"', 1))
    return root


@pytest.fixture
def job_settings(
    tmp_path: Path, temporal_server: DevServer, github: FakeGitHub, catalog: Path
) -> Settings:
    """What the workflow configures: no GitHub credentials of evalbot's own (the job's
    GITHUB_TOKEN is used), no check runs. The session's dev server stands in for the embedded
    one the job starts (same engine, workers in the command's process)."""
    github.add_token(TOKEN, ACTIONS_BOT_LOGIN)
    return engine_settings_for(
        tmp_path / "evalbot",
        temporal_server,
        catalog,
        sandbox={"provider": "process", "allow_process_provider": True},
        github={"check_runs": False, "max_trials": 5},
    )


@pytest.fixture
def agent_repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")


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


def run_job(
    tmp_path: Path, settings: Settings, github: FakeGitHub, name: str, payload: dict[str, Any]
) -> tuple[Result, Path]:
    """`evalbot action` with the environment a GitHub Actions job has."""
    event, summary = tmp_path / "event.json", tmp_path / "summary.md"
    event.write_text(json.dumps(payload))
    env = {
        "GITHUB_EVENT_NAME": name,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": github.base_url,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_STEP_SUMMARY": str(summary),
        "EVALBOT_GITHUB_API_URL": None,
    }
    return CliRunner().invoke(action_command, [], obj=settings, env=env), summary


def reports(github: FakeGitHub, pr: int, dataset: str = "tiny") -> list[dict[str, Any]]:
    mine = [c for c in github.comments_on(REPO, pr) if c["user"]["login"] == ACTIONS_BOT_LOGIN]
    return [c for c in mine if c["body"].startswith(marker(dataset))]


def experiments(address: str, prefix: str) -> list[str]:
    async def listed() -> list[str]:
        client = await Client.connect(address)
        query = f'WorkflowId STARTS_WITH "{prefix}" AND WorkflowType = "ExperimentWorkflow"'
        return sorted({w.id async for w in client.list_workflows(query)})

    return asyncio.run(listed())


def test_an_eval_comment_runs_in_the_job_and_leaves_the_final_sticky_report(
    tmp_path: Path, job_settings: Settings, github: FakeGitHub, agent_repo: AgentRepo, pr: int
) -> None:
    serve_pull(github, agent_repo, pr)
    payload = pr_comment(f"/eval tiny --trials 1 --cases {CASE}")
    payload["issue"]["number"] = pr
    payload["comment"]["id"] = github.add_comment(REPO, pr, payload["comment"]["body"], "x")["id"]

    result, summary = run_job(tmp_path, job_settings, github, "issue_comment", payload)

    assert result.exit_code == 0, result.output
    experiment_id = f"gh/{REPO}/pr{pr}/tiny/{agent_repo.head[:12]}"
    assert json.loads(result.output)["experiments"] == {experiment_id: "done"}
    (report,) = reports(github, pr)
    body = report["body"]
    assert "| criterion |" in body and "⏳" not in body  # the final table, not progress
    assert f"**base** ({agent_repo.base[:7]}), **head** ({agent_repo.head[:7]})" in body
    assert github.reactions_on(payload["comment"]["id"]) == ["rocket"]
    assert f"`{experiment_id}`: done" in summary.read_text()


def test_a_label_runs_the_prs_labelled_datasets_and_a_push_runs_them_for_the_new_head(
    tmp_path: Path, job_settings: Settings, github: FakeGitHub, agent_repo: AgentRepo, pr: int
) -> None:
    """`eval:tiny` is added while `eval:tiny-b` is on: this job cancelled the PR's running job
    (its concurrency group), so it runs both."""
    github.set_permission(REPO, "Codertocat", "write")
    labels = ["eval:tiny-b", "bug", "eval:tiny"]
    labelled = pull_event("labeled", label="eval:tiny", labels=labels)
    labelled["pull_request"] = serve_pull(github, agent_repo, pr, labels=labels)
    labelled["number"] = pr

    first, _ = run_job(tmp_path, job_settings, github, "pull_request", labelled)
    assert first.exit_code == 0, first.output
    head = agent_repo.head[:12]
    assert json.loads(first.output)["experiments"] == {
        f"gh/{REPO}/pr{pr}/tiny/{head}": "done",
        f"gh/{REPO}/pr{pr}/tiny-b/{head}": "done",
    }
    for dataset in ("tiny", "tiny-b"):
        (report,) = reports(github, pr, dataset)
        assert f"**head** ({agent_repo.head[:7]})" in report["body"]

    (agent_repo.path / "NOTES.md").write_text("a new push\n")
    new_head = commit_all(agent_repo.path, "a new push")
    push = pull_event("synchronize", labels=labels)
    push["pull_request"] = serve_pull(github, agent_repo, pr, head_sha=new_head, labels=labels)
    push["number"] = pr
    second, _ = run_job(tmp_path, job_settings, github, "pull_request", push)

    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["experiments"] == {
        f"gh/{REPO}/pr{pr}/tiny/{new_head[:12]}": "done",
        f"gh/{REPO}/pr{pr}/tiny-b/{new_head[:12]}": "done",
    }
    for dataset in ("tiny", "tiny-b"):
        (report,) = reports(github, pr, dataset)  # the same sticky comment, for the new head
        assert f"**head** ({new_head[:7]})" in report["body"]
        assert "| criterion |" in report["body"]


def test_a_label_added_by_someone_without_write_access_gets_one_reply(
    tmp_path: Path,
    job_settings: Settings,
    github: FakeGitHub,
    agent_repo: AgentRepo,
    pr: int,
    temporal_server: DevServer,
) -> None:
    labels = ["eval:tiny-b", "eval:tiny"]
    labelled = pull_event("labeled", label="eval:tiny", labels=labels, sender="eve")
    labelled["pull_request"] = serve_pull(github, agent_repo, pr, labels=labels)
    labelled["number"] = pr

    result, _ = run_job(tmp_path, job_settings, github, "pull_request", labelled)

    assert result.exit_code == 0, result.output
    assert [o["action"] for o in json.loads(result.output)["outcomes"]] == ["refused"]
    assert experiments(temporal_server.address, f"gh/{REPO}/pr{pr}/") == []
    (reply,) = github.comments_on(REPO, pr)
    assert "@eve" in reply["body"] and "write access" in reply["body"]


def test_a_push_without_an_eval_label_runs_nothing(
    tmp_path: Path,
    job_settings: Settings,
    github: FakeGitHub,
    agent_repo: AgentRepo,
    pr: int,
    temporal_server: DevServer,
) -> None:
    push = pull_event("synchronize", labels=["bug"])
    push["pull_request"] = serve_pull(github, agent_repo, pr, labels=["bug"])
    push["number"] = pr

    result, _ = run_job(tmp_path, job_settings, github, "pull_request", push)

    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "outcomes": [{"action": "ignored", "detail": "", "experiments": []}],
        "experiments": {},
    }
    assert experiments(temporal_server.address, f"gh/{REPO}/pr{pr}/") == []
    assert github.comments_on(REPO, pr) == []


def test_an_outsiders_comment_runs_nothing_and_gets_the_bots_polite_reply(
    tmp_path: Path,
    job_settings: Settings,
    github: FakeGitHub,
    agent_repo: AgentRepo,
    pr: int,
    temporal_server: DevServer,
) -> None:
    serve_pull(github, agent_repo, pr)
    payload = pr_comment("/eval tiny", association="NONE", login="eve")
    payload["issue"]["number"] = pr

    result, _ = run_job(tmp_path, job_settings, github, "issue_comment", payload)

    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.output)["outcomes"]
    assert outcome["action"] == "refused"
    assert experiments(temporal_server.address, f"gh/{REPO}/pr{pr}/") == []
    (reply,) = github.comments_on(REPO, pr)
    assert reply["user"]["login"] == ACTIONS_BOT_LOGIN
    assert "@eve" in reply["body"] and "write access" in reply["body"]


def test_without_an_event_the_error_says_where_it_comes_from(job_settings: Settings) -> None:
    env = {"GITHUB_EVENT_NAME": None, "GITHUB_EVENT_PATH": None}
    result = CliRunner().invoke(action_command, [], obj=job_settings, env=env)
    assert result.exit_code == 2
    assert "GITHUB_EVENT_NAME and GITHUB_EVENT_PATH" in result.output


def test_the_workflow_token_and_api_url_are_used_only_when_nothing_else_is_set() -> None:
    actions_env = {"GITHUB_TOKEN": "ghs_x", "GITHUB_API_URL": "https://ghe.example/api/v3"}
    mapped = actions_settings(Settings(), actions_env)
    assert mapped.github.token is not None and mapped.github.token.get_secret_value() == "ghs_x"
    assert mapped.github.api_url == "https://ghe.example/api/v3"
    assert mapped.github.bot_login == ACTIONS_BOT_LOGIN
    app = Settings(github={"app_id": "7", "api_url": "https://own.example"})
    kept = actions_settings(app, {**actions_env, "EVALBOT_GITHUB_API_URL": "https://own.example"})
    assert kept.github.token is None and kept.github.api_url == "https://own.example"


def test_a_cancelled_job_on_its_embedded_engine_cancels_its_experiment_and_says_so(
    tmp_path: Path, github: FakeGitHub, catalog: Path, agent_repo: AgentRepo, pr: int
) -> None:
    """As in a workflow: `evalbot action` as a process, settings from the environment, no
    EVALBOT_TEMPORAL_ADDRESS (so it starts its own dev server). The runner cancels a job with
    SIGINT (then SIGTERM 7.5 s later, SIGKILL 2.5 s after that): the job cancels its experiment,
    whose report says so, and ends."""
    github.add_token(TOKEN, ACTIONS_BOT_LOGIN)
    serve_pull(github, agent_repo, pr)
    payload = pr_comment("/eval tiny --trials 1 --set sleep_s=120")
    payload["issue"]["number"] = pr
    payload["comment"]["id"] = github.add_comment(REPO, pr, payload["comment"]["body"], "x")["id"]
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    env = {name: value for name, value in os.environ.items() if not name.startswith("EVALBOT_")}
    env |= {
        "EVALBOT_DATA_DIR": str(tmp_path / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(catalog),
        "EVALBOT_PROVIDER": "process",
        "EVALBOT_ALLOW_PROCESS_PROVIDER": "true",
        "EVALBOT_GITHUB_CHECK_RUNS": "false",
        "EVALBOT_GITHUB_ARM_CONFIG_KEYS": "sleep_s",  # the tiny agent's knob (docs/github-bot.md)
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": github.base_url,
        "GITHUB_TOKEN": TOKEN,
    }
    job = subprocess.Popen(
        [sys.executable, "-m", "bot", "action"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not reports(github, pr):  # queued: the job's engine and worker are up
            assert job.poll() is None, job.communicate()[0].decode()
            assert time.monotonic() < deadline, "the job posted no report"
            time.sleep(0.1)
        job.send_signal(signal.SIGINT)
        output = job.communicate(timeout=60)[0].decode()  # ~9 s here; timing is not the point
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, output
    (report,) = reports(github, pr)
    assert "**Cancelled**" in report["body"], report["body"]
    experiment_id = f"gh/{REPO}/pr{pr}/tiny/{agent_repo.head[:12]}"
    assert json.loads(output[output.index("{") :])["experiments"] == {experiment_id: "cancelled"}
    assert TOKEN not in output
