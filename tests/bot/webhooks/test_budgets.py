"""Budgets of experiments the bot starts, over real HTTP with GitHub's example payloads: the
repository's default budget (EVALBOT_REPO_BUDGETS_USD, else EVALBOT_BUDGET_USD), lowered to what
is left of its daily cap (EVALBOT_DAILY_CAP_USD), becomes the spec label `budget_usd` that the
ExperimentWorkflow stops scheduling at; a spent cap starts nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import HEAD_SHA, NUMBER, REPO, pr_comment, pull_event, pull_json
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import make_spec, scored_run
from workflows.settings import Settings
from workflows.store import Store

EXPERIMENT = f"gh/{REPO}/pr{NUMBER}/tiny/{HEAD_SHA[:12]}"
CLONE_URL = pull_json()["base"]["repo"]["clone_url"]


@contextlib.contextmanager
def bot(settings: Settings, store: Store, launcher: FakeLauncher) -> Iterator[Sender]:
    clients = GitHubClients(settings, options=ClientOptions.fast())
    app = create_app(settings, launcher, store, github=clients)
    with AppServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield Sender(client)


def eval_comment(github: FakeGitHub, body: str = "/eval tiny") -> dict[str, Any]:
    payload = pr_comment(body)
    payload["comment"]["id"] = github.add_comment(REPO, NUMBER, body, "Codertocat")["id"]
    return payload


def bot_replies(github: FakeGitHub) -> list[str]:
    return [c["body"] for c in github.comments_on(REPO, NUMBER) if c["user"]["type"] == "Bot"]


def started_budget(launcher: FakeLauncher) -> float | None:
    assert launcher.start_calls == [EXPERIMENT]
    label = launcher.experiments[EXPERIMENT].spec.labels.get("budget_usd")
    return None if label is None else float(label)


def test_eval_comment_gets_the_repositorys_default_budget(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    settings = bot_settings.with_changes(
        budget={"per_repo_usd": {REPO: 2.5, "someone/else": 99.0}, "default_usd": 7.0}
    )
    with bot(settings, store, launcher) as sender:
        response = sender.deliver("issue_comment", eval_comment(github))
    assert response.json()["action"] == "started"
    assert started_budget(launcher) == 2.5


def test_eval_label_gets_the_repositorys_default_budget(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    settings = bot_settings.with_changes(budget={"per_repo_usd": {REPO: 0.75}})
    github.set_permission(REPO, "Codertocat", "admin")
    payload = pull_event("labeled", label="eval:tiny", labels=["eval:tiny"])
    with bot(settings, store, launcher) as sender:
        assert sender.deliver("pull_request", payload).json()["action"] == "started"
    assert started_budget(launcher) == 0.75


def test_the_clone_url_is_a_key_too_and_the_global_default_is_the_fallback(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    by_url = bot_settings.with_changes(budget={"per_repo_usd": {CLONE_URL: 1.25}})
    with bot(by_url, store, launcher) as sender:
        sender.deliver("issue_comment", eval_comment(github))
    assert started_budget(launcher) == 1.25

    other = FakeLauncher()
    fallback = bot_settings.with_changes(
        budget={"per_repo_usd": {"someone/else": 99.0}, "default_usd": 3.0}
    )
    with bot(fallback, store, other) as sender:
        sender.deliver("issue_comment", eval_comment(github))
    assert started_budget(other) == 3.0


def test_without_a_budget_setting_there_is_no_budget(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    assert sender.deliver("issue_comment", eval_comment(github)).json()["action"] == "started"
    assert started_budget(launcher) is None


# -- the daily cap ---------------------------------------------------------------------------------


def spent_earlier_today(store: Store, usd: float, repo: str = CLONE_URL) -> None:
    """An experiment of the repository started today whose finished runs cost `usd`."""
    spec = make_spec(n_cases=2, trials=1).model_copy(
        update={"experiment_id": f"earlier-{repo}", "repo": repo}
    )
    store.save_experiment(spec)
    for i in range(2):
        store.save_run(scored_run(spec, i, "main", 0, {"x": 1.0}, cost=usd / 2))


def test_the_budget_is_lowered_to_what_is_left_of_the_daily_cap(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    settings = bot_settings.with_changes(budget={"per_repo_usd": {REPO: 2.5}, "daily_cap_usd": 1.0})
    spent_earlier_today(store, 0.7)
    spent_earlier_today(store, 5.0, repo="https://github.com/someone/else.git")  # not ours
    with bot(settings, store, launcher) as sender:
        assert sender.deliver("issue_comment", eval_comment(github)).json()["action"] == "started"
    assert started_budget(launcher) == pytest.approx(0.3)


def test_without_a_budget_the_daily_cap_still_binds(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    settings = bot_settings.with_changes(budget={"daily_cap_usd": 1.0})
    spent_earlier_today(store, 0.4)
    with bot(settings, store, launcher) as sender:
        sender.deliver("issue_comment", eval_comment(github))
    assert started_budget(launcher) == pytest.approx(0.6)


def test_a_spent_daily_cap_starts_nothing_and_says_why(
    bot_settings: Settings, store: Store, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    settings = bot_settings.with_changes(budget={"daily_cap_usd": 1.0})
    spent_earlier_today(store, 1.0)
    github.set_permission(REPO, "Codertocat", "admin")
    labeled = pull_event("labeled", label="eval:tiny", labels=["eval:tiny"])
    pushed = pull_event("synchronize", labels=["eval:tiny", "eval:nope"])  # answered once
    with bot(settings, store, launcher) as sender:
        by_comment = sender.deliver("issue_comment", eval_comment(github))
        by_label = sender.deliver("pull_request", labeled)
        by_push = sender.deliver("pull_request", pushed)
    assert by_comment.json()["action"] == "refused"
    assert by_label.json()["action"] == "rejected"
    assert by_push.json()["experiments"] == []
    assert launcher.start_calls == []
    replies = bot_replies(github)
    assert len(replies) == 3
    assert all("daily cap of $1.00" in r and "is spent" in r for r in replies), replies
