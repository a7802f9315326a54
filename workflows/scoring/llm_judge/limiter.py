"""Thread-safe request pacing: a token bucket for the rate and a semaphore for concurrency.

The score stage grades runs from worker threads, so every thread shares one `CallGate`. The rate
is any `Pacer`: this process's `TokenBucket`, or the cluster's bucket in the database
(workflows/store/rate_limits.py, wired by the composition root; docs/judges.md, "Limits across
workers").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class Pacer(Protocol):
    def acquire(self) -> float:
        """Block until the caller may make its request; return the seconds waited."""
        ...


class TokenBucket:
    """At most `rate_per_s` acquisitions per second on average, `burst` back to back.

    Implemented as GCRA (a reservation per caller under a lock, the wait outside it), which is a
    token bucket that is also first-come first-served."""

    def __init__(
        self,
        rate_per_s: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self._interval = 1.0 / rate_per_s if rate_per_s > 0 else 0.0
        self._tolerance = (burst - 1) * self._interval
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._theoretical_arrival = 0.0

    def reserve(self) -> float:
        """Take the next slot; return how long the caller must wait before using it."""
        if self._interval == 0.0:
            return 0.0
        with self._lock:
            now = self._clock()
            arrival = max(self._theoretical_arrival, now)
            self._theoretical_arrival = arrival + self._interval
            return max(0.0, arrival - self._tolerance - now)

    def acquire(self) -> float:
        """Block until a slot is ours; return the seconds waited."""
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait


class CallGate:
    """Concurrency first (a slot in flight), then the rate (a token), for each request."""

    def __init__(self, concurrency: int, bucket: Pacer) -> None:
        self._slots = threading.BoundedSemaphore(concurrency)
        self._bucket = bucket

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        with self._slots:
            self._bucket.acquire()
            yield
