"""Work that must end before its clean-up starts, even when the caller is cancelled.

A step running in a thread cannot be stopped: cancelling the coroutine that awaits it only stops
the waiting. Clean-up started at once would race the step (remove a folder the step then writes
into, unmount a disk the step then mounts), and what the step makes afterwards is left behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def settled(work: Awaitable[T]) -> T:
    """Await `work` to its end. If the caller is cancelled meanwhile, `work` still runs to its
    end (or its error) before the cancellation is raised here, so the caller's clean-up sees
    everything the work made."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()
