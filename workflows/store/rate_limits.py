"""`SharedRateLimit`: a rate limit that every process and host using the same database shares
(docs/judges.md and docs/modal.md, "Limits across workers").

    judge_rate = SharedRateLimit(store, "judge", rate_per_s=5, burst=1)
    judge_rate.acquire()        # threads: blocks until this caller's slot (returns the wait)
    await judge_rate.take()     # asyncio: the same, without blocking the event loop

Each acquisition is one short write transaction on the bucket's row (rate_buckets.py); the wait
happens outside it, so no lock is held while callers sleep. A slot taken is spent even if the
caller then gives up, so a crash can only make the cluster slower than the limit, never faster.
A store outage (a database restart or failover) is waited out for up to `outage_s`, retrying with
backoff; after that the StoreError is raised to the caller.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

from workflows.store.store import Store
from workflows.store.store_errors import StoreError

JUDGE_BUCKET = "judge"
MODAL_CREATE_BUCKET = "modal-create"
OUTAGE_S = 30.0


class SharedRateLimit:
    """At most `rate_per_s` acquisitions per second across the cluster, `burst` back to back;
    rate 0 = no limit (nothing is written)."""

    def __init__(
        self,
        store: Store,
        name: str,
        rate_per_s: float,
        burst: int = 1,
        *,
        outage_s: float = OUTAGE_S,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.store = store
        self.name = name
        self.interval_s = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
        self.tolerance_s = (burst - 1) * self.interval_s
        self.outage_s = outage_s
        self._sleep = sleep
        self._async_sleep = async_sleep

    def reserve(self) -> float:
        """Take the next slot; return how long the caller must wait before using it. A store
        outage is waited out (blocking) for up to `outage_s`."""
        if self.interval_s == 0.0:
            return 0.0
        for delay in self._backoff():
            try:
                return self._slot()
            except StoreError:
                if delay is None:
                    raise
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def acquire(self) -> float:
        """Block until a slot is ours; return the seconds waited."""
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait

    async def take(self) -> float:
        """Wait for a slot without blocking the event loop; return the seconds waited. Only the
        database statement runs in a thread: the waits (slot, outage) are the loop's."""
        if self.interval_s == 0.0:
            return 0.0
        wait = await self._reserve_async()
        if wait > 0:
            await self._async_sleep(wait)
        return wait

    async def _reserve_async(self) -> float:
        for delay in self._backoff():
            try:
                return await asyncio.to_thread(self._slot)
            except StoreError:
                if delay is None:
                    raise
            await self._async_sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _slot(self) -> float:
        return self.store.take_rate_slot(self.name, self.interval_s, self.tolerance_s)

    def _backoff(self) -> Iterator[float | None]:
        """Before each try, the pause after it should it fail; None before the last try."""
        deadline, delay = time.monotonic() + self.outage_s, 0.25
        while time.monotonic() + delay <= deadline:
            yield delay
            delay = min(delay * 2, 5.0)
        yield None
