"""GitHub credentials: App JWT -> installation token cached until expiry, or a personal token;
the API base URL is configurable (the fake serves under /api/v3, as GitHub Enterprise does)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from github import Github, GithubException
from pydantic import SecretStr

from bot.github.github_auth import GitHubConfigError, InstallationToken, TokenCache
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.payloads import REPO
from tests.fakes.github_server import FakeGitHub
from workflows.settings import Settings


def read_pull(client: Github) -> str:
    """One real request (PyGithub objects are lazy)."""
    return str(client.get_repo(REPO).get_pull(2).title)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_cache_refreshes_only_near_expiry() -> None:
    clock, fetched = Clock(), []

    def fetch(installation: int) -> InstallationToken:
        fetched.append(installation)
        return InstallationToken(f"t{len(fetched)}", clock.now + 3600)

    cache = TokenCache(fetch, clock=clock, margin_s=60)
    assert cache.get(7).token == "t1"
    clock.now += 3500
    assert cache.get(7).token == "t1"
    assert cache.get(8).token == "t2"  # per installation
    clock.now += 50  # within the margin of t1's expiry
    assert cache.get(7).token == "t3"
    assert fetched == [7, 8, 7]


def app_settings(github: FakeGitHub, tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        github={
            "api_url": github.base_url,
            "app_id": str(github.app_id),
            "private_key": github.app_private_key,
        },
    )


def test_app_installation_token_is_cached_until_expiry(github: FakeGitHub, tmp_path: Path) -> None:
    clock = Clock()
    clock.now = time.time()
    clients = GitHubClients(
        app_settings(github, tmp_path), options=ClientOptions.fast(), clock=clock
    )
    for _ in range(3):
        read_pull(clients.for_repo(REPO, 1))
    tokens = github.calls_to("POST", r"^/app/installations/1/access_tokens$")
    assert len(tokens) == 1 and tokens[0].auth == "jwt"
    assert {c.auth for c in github.calls_to("GET", r"^/repos/")} == {"token:evalbot[bot]"}
    clock.now += github.token_ttl_s  # the token has expired
    read_pull(clients.for_repo(REPO, 1))
    assert len(github.calls_to("POST", r"/access_tokens$")) == 2
    assert clients.bot_login() == "evalbot[bot]"


def test_installation_is_looked_up_when_the_payload_has_none(
    github: FakeGitHub, tmp_path: Path
) -> None:
    clients = GitHubClients(app_settings(github, tmp_path), options=ClientOptions.fast())
    clients.for_repo("Codertocat/Hello-World")
    clients.for_repo("Codertocat/Hello-World")
    assert len(github.calls_to("GET", r"^/repos/Codertocat/Hello-World/installation$")) == 1


def test_wrong_app_key_is_rejected_by_github(github: FakeGitHub, tmp_path: Path) -> None:
    other = FakeGitHub()  # a different key pair
    settings = app_settings(github, tmp_path)
    settings.github.private_key = SecretStr(other.app_private_key)
    with pytest.raises(GithubException, match="401"):
        GitHubClients(settings, options=ClientOptions.fast()).for_repo("Codertocat/Hello-World", 1)


def test_personal_token(github: FakeGitHub, tmp_path: Path) -> None:
    github.add_token("ghp_local", "dev-user")
    settings = Settings(
        data_dir=tmp_path, github={"api_url": github.base_url, "token": "ghp_local"}
    )
    clients = GitHubClients(settings, options=ClientOptions.fast())
    assert not clients.is_app
    read_pull(clients.for_repo(REPO))
    assert clients.bot_login() == "dev-user"
    assert {c.auth for c in github.calls} == {"token:dev-user"}
    assert github.calls_to("POST", r"/access_tokens") == []
    assert "ghp_local" not in repr(settings)


def test_missing_or_unreadable_credentials_are_one_clear_sentence(tmp_path: Path) -> None:
    with pytest.raises(GitHubConfigError, match="EVALBOT_GITHUB_TOKEN"):
        GitHubClients(Settings(data_dir=tmp_path))
    with pytest.raises(GitHubConfigError, match="PRIVATE_KEY"):
        GitHubClients(Settings(data_dir=tmp_path, github={"app_id": "1"}))
    missing = tmp_path / "nope.pem"
    with pytest.raises(GitHubConfigError, match=f"cannot read .* at {missing}"):
        GitHubClients(
            Settings(data_dir=tmp_path, github={"app_id": "1", "private_key_path": missing})
        )


def test_private_key_from_a_file(github: FakeGitHub, tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text(github.app_private_key)
    settings = Settings(
        data_dir=tmp_path,
        github={"api_url": github.base_url, "app_id": str(github.app_id), "private_key_path": key},
    )
    GitHubClients(settings, options=ClientOptions.fast()).for_repo("Codertocat/Hello-World", 1)
    assert github.calls_to("POST", r"/access_tokens$")
