"""Connecting waits (a bounded time) for a Temporal server that is still starting: a dev server
opens its port before its frontend is healthy, and clients started beside it must not fail."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect
from workflows.ports import free_port
from workflows.settings import Settings


async def test_a_client_started_before_the_server_connects_once_it_is_up(tmp_path: Path) -> None:
    port = free_port()
    server = DevServer(db_file=tmp_path / "temporal.db", port=port)
    settings = Settings(temporal={"address": f"127.0.0.1:{port}"})

    async def start_later() -> None:
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.start)

    starter = asyncio.create_task(start_later())
    try:
        client = await connect(settings, wait_s=30)
        assert (await client.service_client.check_health()) is True
    finally:
        await starter
        server.stop()


async def test_no_server_fails_after_the_wait() -> None:
    settings = Settings(temporal={"address": f"127.0.0.1:{free_port()}"})
    started = time.monotonic()
    with pytest.raises(RuntimeError):
        await connect(settings, wait_s=1)
    assert 1 <= time.monotonic() - started < 10
