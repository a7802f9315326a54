"""Delivery de-duplication: a redelivered `X-GitHub-Delivery` id is a no-op once handled.

The claim lives in the store (`Store.claim_delivery`), so every web process and host sees it: a
delivery is claimed with a lease before the handlers run, finished when they succeed and released
when they fail, so that GitHub's "Redeliver" retries it at whichever process receives it. A process
that dies mid-handling leaves a claim whose lease expires (`github.delivery_lease_s`;
docs/github-bot.md).
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class DeliveryLog(Protocol):
    def claim_delivery(self, delivery_id: str, event: str, lease_s: float) -> bool:
        """Claim a delivery for `lease_s` seconds; True when it is ours to handle."""

    def finish_delivery(self, delivery_id: str) -> None:
        """The delivery was handled: later redeliveries are duplicates."""

    def release_delivery(self, delivery_id: str) -> None:
        """The delivery failed: a redelivery runs it again."""


class DeliveryGate:
    def __init__(self, log: DeliveryLog, lease_s: float) -> None:
        self._log = log
        self._lease_s = lease_s

    async def claim(self, delivery_id: str, event: str) -> bool:
        """True when this delivery should be handled here (first time, released after a
        failure, or its previous claim expired)."""
        return await asyncio.to_thread(self._log.claim_delivery, delivery_id, event, self._lease_s)

    async def finish(self, delivery_id: str) -> None:
        """Its handling ended (handled, or refused as bad input): redeliveries are duplicates."""
        await asyncio.to_thread(self._log.finish_delivery, delivery_id)

    async def release(self, delivery_id: str) -> None:
        """Its handling failed: let a redelivery of this id run again, at any process."""
        await asyncio.to_thread(self._log.release_delivery, delivery_id)
