"""A fork pull request's runs get only the secret groups its dataset declares fork-safe; a
same-repository PR's runs get every group the agent's evalbot.toml names; the sticky comment says
which (docs/secrets.md, "Fork pull requests").

End to end from GitHub's real `pull_request` payload (made a fork: head.repo differs from
base.repo) through the bot's planner, the Temporal dev server, the engine and the local sandbox
provider: the agent itself reports which secret variables it found in its environment. And over
the webhook: real `issue_comment.created` deliveries on a fork PR, approved for one SHA.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from bot.dashboard.run_outputs import answer_of
from bot.github.github_types import PullInfo
from bot.github.report_comment import comment_body
from bot.grammar import StartEval
from bot.pr_planning import Planner
from bot.render import render_markdown
from tests.bot.conftest import Sender
from tests.bot.payloads import HEAD_SHA, load, pr_comment, pull_json
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from tests.support.agent_repo import TINY_CATALOG
from tests.support.temporal import engine_settings_for
from workflows.blobs import open_blob_store
from workflows.catalog.labels import SECRET_GROUPS_ALLOWED
from workflows.catalog.models import ExperimentSpec
from workflows.engine.devserver import DevServer
from workflows.engine.repos import commit_all, init_repo
from workflows.report import build_report
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings

GROUPS = {
    "fork-ok": {"FORK_OK_KEY": "fork-ok-value-31c9"},
    "private": {"PRIVATE_KEY": "private-value-77ad"},
}
EVALBOT_TOML = """\
[run]
command = "python3 agent.py"
timeout_s = 60
[sandbox]
memory_mb = 256
secrets = ["fork-ok", "private"]
"""
AGENT = """\
import json, os
from pathlib import Path
out = Path(os.environ.get("EVALBOT_OUT_DIR", "/out"))
names = sorted(k for k in ("FORK_OK_KEY", "PRIVATE_KEY") if os.environ.get(k))
(out / "answer.md").write_text("env: " + ",".join(names) + "\\n")
(out / "usage.json").write_text(json.dumps({"input_tokens": 1, "output_tokens": 1}))
"""
DECISION = "secrets: fork-ok (fork-safe); withheld: private and any other group"


def catalog_with_secrets(root: Path) -> Path:
    shutil.copytree(TINY_CATALOG, root)
    manifest = root / "datasets" / "tiny" / "dataset.toml"
    manifest.write_text(
        manifest.read_text() + 'secret_groups = ["fork-ok", "private"]\n'
        'fork_safe_secret_groups = ["fork-ok"]\n'
    )
    return root


def agent_repo(path: Path) -> tuple[str, str]:
    init_repo(path)
    (path / "evalbot.toml").write_text(EVALBOT_TOML)
    (path / "agent.py").write_text(AGENT)
    base = commit_all(path, "agent")
    (path / "README.md").write_text("a change from the pull request\n")
    return base, commit_all(path, "the pull request's change")


def pull_from_payload(repo: Path, base: str, head: str, *, fork: bool) -> PullInfo:
    """GitHub's pull_request.opened example, pointed at the local repository; a fork's head
    lives in another repository than its base."""
    pull = load("pull_request.opened")["pull_request"]
    pull["head"]["sha"], pull["base"]["sha"] = head, base
    pull["base"]["repo"]["clone_url"] = str(repo)
    if fork:
        pull["head"]["repo"]["full_name"] = "Forker/Hello-World"
        pull["head"]["repo"]["fork"] = True
    info = PullInfo.from_json(pull)
    assert info.is_fork is fork
    return info


async def run(settings: Settings, spec: ExperimentSpec) -> list[str]:
    from bot.composition import open_store, session
    from workflows.engine import engine_client

    store = open_store(settings)
    try:
        async with session(settings, store) as active:
            await engine_client.start_experiment(active.client, settings, spec)
            await engine_client.wait_for(active.client, spec.experiment_id)
        runs = store.list_runs(spec.experiment_id)
        comment = comment_body(spec, render_markdown(build_report(spec, runs)))
        blobs = open_blob_store(settings)
        return [answer_of(blobs, r).strip() for r in runs] + [comment]
    finally:
        store.close()


async def test_a_fork_gets_only_fork_safe_groups_and_the_comment_says_so(
    tmp_path: Path, temporal_server: DevServer
) -> None:
    catalog = catalog_with_secrets(tmp_path / "catalog")
    settings = engine_settings_for(tmp_path / "evalbot", temporal_server, catalog)
    LocalSecretStore.from_settings(settings).replace(GROUPS)
    base, head = agent_repo(tmp_path / "agent")
    planner = Planner(settings)
    request = StartEval("tiny", trials=1, cases=("consent-draft",))

    specs = {
        fork: planner.plan(
            pull_from_payload(tmp_path / "agent", base, head, fork=fork),
            request,
            base,
            requested_by="Codertocat",
        ).model_copy(update={"experiment_id": f"fork-{fork}"})
        for fork in (True, False)
    }
    fork_out, same_out = await asyncio.gather(
        run(settings, specs[True]), run(settings, specs[False])
    )

    *fork_answers, fork_comment = fork_out
    *same_answers, same_comment = same_out
    assert fork_answers == ["env: FORK_OK_KEY"] * 2  # base and head arms
    assert same_answers == ["env: FORK_OK_KEY,PRIVATE_KEY"] * 2
    assert DECISION in fork_comment
    assert "secrets:" not in same_comment


@pytest.fixture
def bot_settings(bot_settings: Settings, tmp_path: Path) -> Settings:
    return bot_settings.with_changes(catalog_root=catalog_with_secrets(tmp_path / "catalog"))


def test_an_approved_fork_comment_starts_a_spec_limited_to_fork_safe_groups(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.add_pull(pull_json(fork=True))
    approve = sender.deliver("issue_comment", pr_comment(f"/eval approve {HEAD_SHA[:7]}"))
    assert approve.json()["action"] == "approved"
    started = sender.deliver("issue_comment", pr_comment("/eval tiny --trials 1"))
    assert started.json()["action"] == "started"
    spec = launcher.experiments[started.json()["experiments"][0]].spec
    assert spec.labels[SECRET_GROUPS_ALLOWED] == "fork-ok"
    assert DECISION in comment_body(spec, "report")

    github.add_pull(pull_json(fork=True, head_sha="1" * 40))  # a push: the approval lapses
    again = sender.deliver("issue_comment", pr_comment("/eval tiny --trials 1"))
    assert again.json()["action"] == "refused"


def test_a_same_repository_comment_starts_an_unrestricted_spec(
    sender: Sender, launcher: FakeLauncher
) -> None:
    started = sender.deliver("issue_comment", pr_comment("/eval tiny --trials 1"))
    spec = launcher.experiments[started.json()["experiments"][0]].spec
    assert SECRET_GROUPS_ALLOWED not in spec.labels
    assert "secrets:" not in comment_body(spec, "report")
