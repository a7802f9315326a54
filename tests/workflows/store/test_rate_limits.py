"""Rate limits shared through the database (workflows/store/rate_limits.py), on SQLite and
PostgreSQL: slots spaced at the rate with the burst up front, and separate processes sharing one
rate — together they never go faster than it, as separate per-process buckets would."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from workflows.store import Store, StoreError
from workflows.store.rate_limits import SharedRateLimit
from workflows.store.tables import rate_buckets

PROCESSES = 3
EACH = 6
RATE = 10.0


def test_slots_are_spaced_at_the_rate_after_the_burst(store: Store) -> None:
    limit = SharedRateLimit(store, "judge", rate_per_s=RATE, burst=3)
    calls = []  # (before, wait, after): the slot was taken at some moment in between
    for _ in range(6):
        before = time.time()
        wait = limit.reserve()
        calls.append((before, wait, time.time()))
    # three back to back, then one every 1/RATE from the first call
    assert [wait for _, wait, _ in calls[:3]] == [0.0, 0.0, 0.0]
    first_before, _, first_after = calls[0]
    for index, (before, wait, after) in enumerate(calls[3:], start=1):
        assert index / RATE - (after - first_before) - 0.01 <= wait
        assert wait <= index / RATE - (before - first_after) + 0.01


def test_buckets_are_separate_and_rate_zero_writes_nothing(store: Store, store_url: str) -> None:
    SharedRateLimit(store, "judge", rate_per_s=RATE).reserve()
    assert SharedRateLimit(store, "modal-create", rate_per_s=RATE).reserve() == 0.0
    assert SharedRateLimit(store, "unlimited", rate_per_s=0).reserve() == 0.0
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            names = connection.execute(select(rate_buckets.c.name)).scalars().all()
            assert sorted(names) == ["judge", "modal-create"]
            assert connection.execute(select(func.count()).select_from(rate_buckets)).scalar()
    finally:
        engine.dispose()


def _acquire_times(job: tuple[str, float]) -> list[float]:
    """In a separate process: wait for the common start, then take EACH slots; when each came."""
    url, start_at = job
    time.sleep(max(0.0, start_at - time.time()))
    store = Store(url)
    limit = SharedRateLimit(store, "judge", rate_per_s=RATE)
    times = []
    for _ in range(EACH):
        limit.acquire()
        times.append(time.time())
    store.close()
    return times


def test_processes_sharing_the_database_share_the_rate(store: Store, store_url: str) -> None:
    start_at = time.time() + 1.0  # every process started and connected by then
    with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
        per_process = pool.map(_acquire_times, [(store_url, start_at)] * PROCESSES)
    times = sorted(t for process in per_process for t in process)
    total = PROCESSES * EACH
    # per-process buckets would take (EACH - 1) / RATE = 0.5 s; one shared bucket (total-1)/RATE
    assert times[-1] - times[0] >= (total - 1) / RATE - 0.1
    busiest = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert busiest <= RATE + 1


async def test_async_takers_wait_their_slot_without_blocking_the_loop(store: Store) -> None:
    limit = SharedRateLimit(store, "modal-create", rate_per_s=RATE)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    clock = asyncio.create_task(ticker())
    started = time.monotonic()
    await asyncio.gather(*(limit.take() for _ in range(5)))
    took = time.monotonic() - started
    clock.cancel()
    assert took >= 4 / RATE - 0.02
    assert ticks >= 10  # the loop kept running while the takers waited


@pytest.mark.parametrize("burst", [0, -1])
def test_a_burst_below_one_is_refused(store: Store, burst: int) -> None:
    with pytest.raises(ValueError, match="burst must be at least 1"):
        SharedRateLimit(store, "judge", rate_per_s=RATE, burst=burst)


def test_a_store_outage_is_waited_out_then_reported(tmp_path: Path) -> None:
    """The bucket's table missing stands in for a database that is down: a short outage is
    retried until the store is back; a longer one raises the StoreError."""
    store = Store(f"sqlite:///{tmp_path / 'evalbot.db'}")
    with pytest.raises(StoreError, match="no evalbot schema"):
        SharedRateLimit(store, "judge", rate_per_s=RATE, outage_s=0.3).reserve()
    threading.Timer(0.5, store.migrate).start()  # the database comes back
    assert SharedRateLimit(store, "judge", rate_per_s=RATE, outage_s=10).reserve() == 0.0
    store.close()


async def test_async_takers_wait_out_an_outage_on_the_loop(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'evalbot.db'}")
    limit = SharedRateLimit(store, "modal-create", rate_per_s=RATE, outage_s=0.3)
    with pytest.raises(StoreError, match="no evalbot schema"):
        await limit.take()
    asyncio.get_running_loop().call_later(0.5, store.migrate)  # the database comes back
    assert await SharedRateLimit(store, "modal-create", rate_per_s=RATE, outage_s=10).take() == 0.0
    store.close()
