"""PyGithub client factory: one client per App installation (or one for a personal token).

Build a `GitHubClients` once at the edge and pass it down. `ClientOptions` holds the HTTP knobs;
tests and benchmarks turn retries and PyGithub's request spacing off (`ClientOptions.fast()`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from github import Auth, Consts, Github, GithubIntegration
from github.GithubRetry import GithubRetry

from bot.github.github_auth import AppCredentials, InstallationToken, TokenCache, app_credentials
from workflows.settings import Settings


@dataclass(frozen=True)
class ClientOptions:
    """Retries and request spacing; production keeps PyGithub's defaults (GitHub's guidance)."""

    retries: int | None = None  # None = PyGithub's GithubRetry (5xx, rate limits); 0 = none
    seconds_between_requests: float | None = Consts.DEFAULT_SECONDS_BETWEEN_REQUESTS
    seconds_between_writes: float | None = Consts.DEFAULT_SECONDS_BETWEEN_WRITES
    pool_size: int | None = None

    @classmethod
    def fast(cls) -> ClientOptions:
        """No retries, no spacing: for tests and benchmarks against a local fake."""
        return cls(retries=0, seconds_between_requests=0, seconds_between_writes=0)

    def kwargs(self, timeout: int) -> dict[str, Any]:
        return {
            "timeout": timeout,
            "retry": GithubRetry() if self.retries is None else (self.retries or None),
            "seconds_between_requests": self.seconds_between_requests,
            "seconds_between_writes": self.seconds_between_writes,
            "pool_size": self.pool_size,
        }


class GitHubClients:
    """Hands out authenticated PyGithub clients; thread-safe."""

    def __init__(
        self,
        settings: Settings,
        *,
        options: ClientOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._base_url = settings.github.api_url.rstrip("/")
        self._kwargs = (options or ClientOptions()).kwargs(settings.github.timeout_s)
        self._bot_login = settings.github.bot_login
        self._app = app_credentials(settings)
        self._token = settings.github.token.get_secret_value() if settings.github.token else None
        self._tokens = TokenCache(self._fetch_installation_token, clock=clock)
        self._clients: dict[tuple[int, str], Github] = {}
        self._installations: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def is_app(self) -> bool:
        return self._app is not None

    def for_repo(self, repo: str, installation_id: int | None = None) -> Github:
        """A client allowed to act on `repo` (owner/name)."""
        if self._token is not None:
            return self._client(0, self._token)
        installation = installation_id or self._installation_of(repo)
        token = self._tokens.get(installation)
        return self._client(installation, token.token)

    def bot_login(self) -> str:
        """The login the bot's comments appear under (`<app-slug>[bot]` for an App)."""
        if self._bot_login is None:
            self._bot_login = self._ask_bot_login()
        return self._bot_login

    def _ask_bot_login(self) -> str:
        if self._token is not None:
            return str(self._client(0, self._token).get_user().login)
        return f"{self._integration().get_app().slug}[bot]"

    def _client(self, installation: int, token: str) -> Github:
        with self._lock:
            client = self._clients.get((installation, token))
            if client is None:
                self._drop_stale(installation)
                client = Github(
                    auth=Auth.Token(token), base_url=self._base_url, lazy=True, **self._kwargs
                )
                self._clients[(installation, token)] = client
            return client

    def _drop_stale(self, installation: int) -> None:
        """Forget clients holding an expired token (threads still using one finish normally)."""
        for key in [k for k in self._clients if k[0] == installation]:
            del self._clients[key]

    def _integration(self) -> GithubIntegration:
        assert isinstance(self._app, AppCredentials)
        auth = Auth.AppAuth(self._app.app_id, self._app.private_key)
        return GithubIntegration(auth=auth, base_url=self._base_url, **self._kwargs)

    def _installation_of(self, repo: str) -> int:
        with self._lock:
            known = self._installations.get(repo)
        if known is None:
            owner, name = repo.split("/", 1)
            known = int(self._integration().get_repo_installation(owner, name).id)
            with self._lock:
                self._installations[repo] = known
        return known

    def _fetch_installation_token(self, installation_id: int) -> InstallationToken:
        grant = self._integration().get_access_token(installation_id)
        return InstallationToken(grant.token, grant.expires_at.timestamp())
