"""Stopping cleanly on SIGTERM and SIGINT (`evalbot serve`, `evalbot worker`; docs/deploy.md).

The commands wait on `stop_requested()` instead of dying on the signal: they then stop taking
work, let in-flight requests and activities finish for `temporal.graceful_shutdown_s`, stop the
children they started (the embedded Temporal dev server, the runner spawner) and exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

import uvicorn

log = logging.getLogger(__name__)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_requested() -> asyncio.Event:
    """An event set by the first SIGTERM or SIGINT, from now on in the running loop (main
    thread). A second signal while stopping is logged, not fatal: the children still stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(number: int) -> None:
        if stop.is_set():
            log.warning("%s: already stopping", signal.Signals(number).name)
        stop.set()

    for number in STOP_SIGNALS:
        loop.add_signal_handler(number, on_signal, number)
    return stop


class StoppableServer(uvicorn.Server):
    """uvicorn without its own signal handling (it re-raises the signal after shutting down,
    which kills the process before it stops its children): `stop_on` ends it instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set, then finish in-flight requests (uvicorn's
        timeout_graceful_shutdown) and return."""
        watcher = asyncio.create_task(self._exit_on(stop))
        try:
            await self.serve()
        finally:
            watcher.cancel()

    async def _exit_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.should_exit = True
