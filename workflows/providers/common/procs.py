"""Host processes by (pid, start time), so a recycled pid is never mistaken for our runner."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from workflows.process_owned import start_time as start_time  # re-exported: one reading of /proc


def is_alive(pid: int, started: int) -> bool:
    return pid > 0 and start_time(pid) == started


def kill(pid: int, started: int, signum: int = signal.SIGKILL) -> None:
    if is_alive(pid, started):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


async def wait_gone(pid: int, started: int, timeout_s: float) -> bool:
    """Poll until the process is gone; True if it went within the timeout."""
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while is_alive(pid, started):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True
