"""Admission control for sandbox creation: how fast we create, how many may be starting at once.

Modal limits sandbox creation per account (5/s by default; support raises it) and sandboxes that
are still starting get slow and then fail ("Runtime did not start within 299s") beyond ~128 at once.
Two layers keep a whole deployment under those limits (docs/modal.md, "Admission control"):

1. Across workers, the engine runs `provision` on its own task queue with a server-side rate limit
   (Temporal's `max_task_queue_activities_per_second`): the cluster starts at most that many
   provisions per second, however many workers there are.
2. `Admission` below, per provider instance: a token bucket spacing creations at `creates_per_s`,
   and a semaphore holding at most `max_starting` sandboxes between "create requested" and "first
   command ran". The bucket is this process's `TokenBucket` unless `share_rate` gave it the
   cluster's (a row in the database, workflows/store/rate_limits.py, wired by the composition
   root): then every creation of every worker — image builds and retries included — shares one
   rate (docs/modal.md, "Limits across workers"). It also retries creations the provider refused
   for rate or quota reasons, with jittered exponential backoff; when it gives up it raises
   `SandboxRateLimited`, an infrastructure error, never the agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from workflows.providers.base import SandboxRateLimited

T = TypeVar("T")


@dataclass(frozen=True)
class AdmissionLimits:
    creates_per_s: float = 5.0  # creations per second (this process; see share_rate); 0 = no cap
    max_starting: int = 100  # sandboxes created but not yet running a command; 0 = no cap
    max_attempts: int = 8  # tries of one creation refused for rate or quota reasons
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0


@dataclass
class AdmissionStats:
    created: int = 0
    rate_limited: int = 0  # refusals retried (rate limit or quota)
    gave_up: int = 0  # creations that ended in SandboxRateLimited
    starting: int = 0  # creations admitted now: waiting for a token, creating or setting up
    peak_starting: int = 0
    bucket_wait_s: float = 0.0  # total time creations waited for a token


class CreationRate(Protocol):
    async def take(self) -> float:
        """Wait until the caller may create; return the seconds waited."""
        ...


class TokenBucket:
    """Spaces events at `rate` per second (burst 1): a taker returns no sooner than 1/rate after
    the previous one returned, so any one-second window holds at most `rate` of them — even after
    the event loop stalled (takers wait in turn, measured from when the previous one actually
    left, never released together). Served in order."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.clock = clock
        self.sleep = sleep
        self.last = -math.inf
        self.lock = asyncio.Lock()

    async def take(self) -> float:
        """Wait for a token; returns how long we waited."""
        if self.interval == 0:
            return 0.0
        asked = self.clock()
        async with self.lock:
            wait = self.last + self.interval - self.clock()
            if wait > 0:
                await self.sleep(wait)
            self.last = self.clock()
        return self.last - asked


class Admission:
    """One per provider instance (i.e. per worker process); see the module doc."""

    def __init__(
        self,
        limits: AdmissionLimits,
        is_refusal: Callable[[BaseException], bool],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.limits = limits
        self.is_refusal = is_refusal
        self.bucket: CreationRate = TokenBucket(limits.creates_per_s, clock, sleep)
        self.gate = asyncio.Semaphore(limits.max_starting) if limits.max_starting > 0 else None
        self.sleep = sleep
        self.jitter = jitter
        self.stats = AdmissionStats()

    def share_rate(self, rate: CreationRate) -> None:
        """Pace creations with `rate` (the cluster's bucket) instead of this process's own."""
        self.bucket = rate

    @contextlib.asynccontextmanager
    async def starting(self) -> AsyncIterator[None]:
        """Hold a "starting" slot from before the creation until the sandbox ran its first
        command (or failed). Taken before the token, never after: slots freeing together must not
        release creations together."""
        if self.gate is not None:
            await self.gate.acquire()
        self.stats.starting += 1
        self.stats.peak_starting = max(self.stats.peak_starting, self.stats.starting)
        try:
            yield
        finally:
            self.stats.starting -= 1
            if self.gate is not None:
                self.gate.release()

    async def create(self, make: Callable[[], Awaitable[T]]) -> T:
        """`make()` once a token is free; refusals are retried with backoff."""
        last: BaseException | None = None
        for attempt in range(self.limits.max_attempts):
            self.stats.bucket_wait_s += await self.bucket.take()
            try:
                made = await make()
            except Exception as error:
                if not self.is_refusal(error):
                    raise
                last = error
                self.stats.rate_limited += 1
                await self.sleep(self.backoff(attempt))
                continue
            self.stats.created += 1
            return made
        self.stats.gave_up += 1
        raise SandboxRateLimited(
            f"the provider refused {self.limits.max_attempts} sandbox creations in a row "
            f"(rate limit or quota): {last}"
        )

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max, initial * 2**attempt)], at least a tenth of it."""
        ceiling = min(self.limits.backoff_max_s, self.limits.backoff_initial_s * 2.0**attempt)
        return float(ceiling * max(0.1, self.jitter()))
