"""settled(): a cancelled caller still waits for the work it awaited (a thread cannot be stopped),
so its clean-up never races that work."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from workflows.providers.common.settle import settled


def slow_step(done: threading.Event, seconds: float = 0.3) -> str:
    time.sleep(seconds)
    done.set()
    return "made"


async def test_returns_what_the_work_returns_and_raises_its_error() -> None:
    assert await settled(asyncio.to_thread(slow_step, threading.Event(), 0)) == "made"
    with pytest.raises(ZeroDivisionError):
        await settled(asyncio.to_thread(lambda: 1 / 0))


async def test_a_cancelled_caller_sees_the_work_finished_before_its_clean_up() -> None:
    done = threading.Event()
    seen_at_clean_up: list[bool] = []

    async def create() -> None:
        try:
            await settled(asyncio.to_thread(slow_step, done))
        except asyncio.CancelledError:
            seen_at_clean_up.append(done.is_set())
            raise

    caller = asyncio.ensure_future(create())
    await asyncio.sleep(0.05)
    caller.cancel()
    await asyncio.sleep(0)
    caller.cancel()  # a second cancel does not cut the wait short either
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert seen_at_clean_up == [True]
