"""Delivery de-duplication: a redelivered `X-GitHub-Delivery` id is a no-op.

The id is recorded in the store (`Store.record_delivery`) before the handlers run. When a handler
fails, the id is released in this process, so that GitHub's "Redeliver" retries it instead of
being skipped as a duplicate.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import Protocol

MAX_RELEASED = 10_000


class DeliveryLog(Protocol):
    def record_delivery(self, delivery_id: str, event: str) -> bool:
        """Remember a delivery; True only the first time this id is seen."""


class DeliveryGate:
    def __init__(self, log: DeliveryLog) -> None:
        self._log = log
        self._released: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    async def claim(self, delivery_id: str, event: str) -> bool:
        """True when this delivery should be handled (first time, or released after a failure)."""
        with self._lock:
            if delivery_id in self._released:
                del self._released[delivery_id]
                return True
        return await asyncio.to_thread(self._log.record_delivery, delivery_id, event)

    def release(self, delivery_id: str) -> None:
        """Let a redelivery of this id run again (its handling failed)."""
        with self._lock:
            self._released[delivery_id] = None
            while len(self._released) > MAX_RELEASED:
                self._released.popitem(last=False)
