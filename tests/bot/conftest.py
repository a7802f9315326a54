"""Fixtures for the bot: the fake GitHub, the webhook app over real HTTP, a signed sender."""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from bot.webhooks.signature import sign
from tests.bot.payloads import SECRET, pull_json
from tests.conftest import FIXTURES
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from workflows.ports import free_port
from workflows.settings import Settings
from workflows.store import Store


@functools.cache
def _shared_key() -> tuple[str, Any]:
    """One RSA key per test process (generating one costs ~0.1 s)."""
    fake = FakeGitHub()
    return fake.app_private_key, fake._app_public_key


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    fake.app_private_key, fake._app_public_key = _shared_key()
    fake.start()
    fake.add_pull(pull_json())
    yield fake
    fake.stop()


@pytest.fixture
def bot_settings(tmp_path: Path, github: FakeGitHub) -> Settings:
    return Settings(
        data_dir=tmp_path / "evalbot",
        catalog_root=FIXTURES / "catalog",
        github={
            "webhook_secret": SECRET,
            "api_url": github.base_url,
            "app_id": str(github.app_id),
            "private_key": github.app_private_key,
            "max_trials": 5,
            "max_cases": 10,
            "max_body_bytes": 256 * 1024,
        },
    )


@pytest.fixture
def store(bot_settings: Settings) -> Iterator[Store]:
    store = Store.from_settings(bot_settings)
    store.migrate()
    yield store
    store.close()


@pytest.fixture
def launcher() -> FakeLauncher:
    return FakeLauncher()


class AppServer:
    """A FastAPI app served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> AppServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@dataclass
class Sender:
    """Posts deliveries to the app, signed like GitHub signs them."""

    client: httpx.Client
    secret: str = SECRET

    def deliver(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        delivery: str | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        sent = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "X-Hub-Signature-256": signature or sign(self.secret.encode(), body),
            **(headers or {}),
        }
        return self.client.post("/github/webhook", content=body, headers=sent)


@pytest.fixture
def app(bot_settings: Settings, launcher: FakeLauncher, store: Store) -> Iterator[AppServer]:
    clients = GitHubClients(bot_settings, options=ClientOptions.fast())
    with AppServer(create_app(bot_settings, launcher, store, github=clients)) as server:
        yield server


@pytest.fixture
def sender(app: AppServer) -> Iterator[Sender]:
    with httpx.Client(base_url=app.url, timeout=30) as client:
        yield Sender(client)
