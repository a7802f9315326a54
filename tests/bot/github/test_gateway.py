"""RepoGateway against the fake GitHub, for the calls the webhook tests do not reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.github.gateway import CheckRunUpdate, RepoGateway
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.payloads import HEAD_SHA, NUMBER, REPO
from tests.fakes.github_server import FakeGitHub
from workflows.settings import Settings


@pytest.fixture
def gateway(github: FakeGitHub, tmp_path: Path) -> RepoGateway:
    github.add_token("ghp_x", "dev-user")
    settings = Settings(data_dir=tmp_path, github={"api_url": github.base_url, "token": "ghp_x"})
    clients = GitHubClients(settings, options=ClientOptions.fast())
    return RepoGateway(clients.for_repo(REPO), REPO)


def test_pull_is_read_into_a_plain_record(gateway: RepoGateway) -> None:
    pull = gateway.pull(NUMBER)
    assert (pull.repo, pull.number, pull.head_sha, pull.is_fork) == (REPO, 2, HEAD_SHA, False)


def test_unknown_collaborator_permission_is_none(gateway: RepoGateway, github: FakeGitHub) -> None:
    github.set_permission(REPO, "alice", "write")
    assert gateway.permission("alice") == "write"
    assert gateway.permission("bob") == "read"  # the fake's default for outsiders


def test_long_comments_are_clipped_to_githubs_limit(
    gateway: RepoGateway, github: FakeGitHub
) -> None:
    comment_id = gateway.comment(NUMBER, "x" * 70_000)
    (stored,) = [c for c in github.comments_on(REPO, NUMBER) if c["id"] == comment_id]
    assert len(stored["body"]) <= 65_536 and "truncated" in stored["body"]


def test_approval_status_round_trip(gateway: RepoGateway) -> None:
    assert gateway.approved_by(HEAD_SHA, "dev-user") is None
    gateway.approve(HEAD_SHA, "maintainer")
    assert gateway.approved_by(HEAD_SHA, "dev-user") == "maintainer"
    assert gateway.approved_by(HEAD_SHA, "someone-else") is None


def test_check_runs_need_an_app(gateway: RepoGateway) -> None:
    show = CheckRunUpdate("queued", "Queued", "summary")
    with pytest.raises(Exception, match="403"):
        gateway.create_check_run(HEAD_SHA, "evalbot / tiny", "exp", show)


def test_removing_a_missing_label_is_fine(gateway: RepoGateway) -> None:
    gateway.remove_label(NUMBER, "ok-to-eval")  # the fixture PR has only "bug"
