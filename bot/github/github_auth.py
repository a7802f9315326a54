"""GitHub credentials: a personal token, or a GitHub App whose installation tokens are cached.

A GitHub App signs a short-lived JWT with its private key and trades it for an installation token
(valid one hour). `TokenCache` keeps each installation's token until shortly before it expires, so
most requests cost no extra round trip.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workflows.settings import Settings


class GitHubConfigError(ValueError):
    """The GitHub credentials in the settings are missing or unusable."""


@dataclass(frozen=True)
class InstallationToken:
    token: str
    expires_at: float  # epoch seconds


@dataclass(frozen=True)
class AppCredentials:
    app_id: str
    private_key: str

    def __repr__(self) -> str:  # never show the key
        return f"AppCredentials(app_id={self.app_id!r}, private_key=***)"


class TokenCache:
    """Installation tokens by installation id, refreshed `margin_s` before they expire."""

    def __init__(
        self,
        fetch: Callable[[int], InstallationToken],
        *,
        clock: Callable[[], float] = time.time,
        margin_s: float = 60.0,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._margin_s = margin_s
        self._tokens: dict[int, InstallationToken] = {}
        self._lock = threading.Lock()

    def get(self, installation_id: int) -> InstallationToken:
        with self._lock:
            cached = self._tokens.get(installation_id)
            if cached is None or cached.expires_at - self._margin_s <= self._clock():
                cached = self._fetch(installation_id)
                self._tokens[installation_id] = cached
            return cached


def app_credentials(settings: Settings) -> AppCredentials | None:
    """The App id and private key from the settings; None when a personal token is configured."""
    if settings.github.token is not None:
        return None
    if not settings.github.app_id:
        raise GitHubConfigError(
            "no GitHub credentials: set EVALBOT_GITHUB_TOKEN, or EVALBOT_GITHUB_APP_ID with "
            "EVALBOT_GITHUB_PRIVATE_KEY or EVALBOT_GITHUB_PRIVATE_KEY_PATH"
        )
    return AppCredentials(settings.github.app_id, _private_key(settings))


def _private_key(settings: Settings) -> str:
    if settings.github.private_key is not None:
        return settings.github.private_key.get_secret_value()
    path = settings.github.private_key_path
    if path is None:
        raise GitHubConfigError(
            "EVALBOT_GITHUB_APP_ID is set but neither EVALBOT_GITHUB_PRIVATE_KEY nor "
            "EVALBOT_GITHUB_PRIVATE_KEY_PATH is"
        )
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise GitHubConfigError(
            f"cannot read the GitHub App private key at {path}: {error.strerror}"
        ) from None
