"""`evalbot run --workers N`: N-1 `evalbot worker` processes beside the command's own workers, on
the same Temporal server (the embedded dev server too) and the same data folder, for the run's
duration (docs/engine.md, "Workers on one machine").

A Python worker uses one core at most (its event loop and the GIL), so on a machine with more
cores the extra processes take cells the first one has no CPU for. They are started and waited for
before the experiment starts, so that they take part from its first cell; they stop like any
worker (SIGTERM: in-flight activities get `temporal.graceful_shutdown_s`) when the command ends,
and on their own if the command dies (`evalbot worker --parent-pid`). Each writes its output to
`<data_dir>/workers/<n>.log` (a file, not a pipe: it outlives a killed command) and reports
there how many run results it stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from workflows.settings import Settings

READY = "evalbot worker: serving"
STORED = re.compile(r"evalbot worker: stopped; (\d+) run results? stored here")
START_TIMEOUT_S = 300  # imports and the first connection, on a loaded machine
# Settings an extra worker must not share with this process: each would listen on the same port.
NOT_SHARED = ("EVALBOT_METRICS_WORKER_ADDRESS", "EVALBOT_METRICS_TEMPORAL_ADDRESS")


class WorkersError(Exception):
    """An extra worker did not start; its log says why."""


@dataclass
class ExtraWorker:
    process: asyncio.subprocess.Process
    log: Path

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stored(self) -> int | None:
        """Run results it stored, as it said when it stopped (None: it did not say)."""
        match = STORED.search(self.output())
        return int(match.group(1)) if match else None


def worker_env(address: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in NOT_SHARED}
    return env | {"EVALBOT_TEMPORAL_ADDRESS": address, "PYTHONUNBUFFERED": "1"}


async def start_one(address: str, log: Path) -> ExtraWorker:
    with log.open("wb") as output:  # the child gets its own descriptor
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "worker", "--parent-pid", str(os.getpid()),
            env=worker_env(address), stdin=asyncio.subprocess.DEVNULL,
            stdout=output, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    worker = ExtraWorker(process, log)
    try:
        await asyncio.wait_for(ready(worker), START_TIMEOUT_S)
    except (TimeoutError, WorkersError):
        await stop([worker], grace_s=0)
        raise WorkersError(f"an extra worker did not start (see {log})") from None
    return worker


async def ready(worker: ExtraWorker) -> None:
    while READY not in worker.output():
        if worker.process.returncode is not None:
            raise WorkersError("the worker exited")
        await asyncio.sleep(0.2)  # a file written by another process


async def stop(workers: list[ExtraWorker], grace_s: float) -> None:
    """SIGTERM each and wait; SIGKILL what is still there after the grace and a minute."""
    for worker in workers:
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(signal.SIGTERM)
    waits = [asyncio.wait_for(worker.process.wait(), grace_s + 60) for worker in workers]
    outcomes = await asyncio.gather(*waits, return_exceptions=True)
    for worker, outcome in zip(workers, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            await worker.process.wait()


@contextlib.asynccontextmanager
async def extra_workers(
    settings: Settings, address: str, count: int
) -> AsyncIterator[list[ExtraWorker]]:
    """`count` extra worker processes, ready, for the block; stopped (and waited for) after it."""
    if count == 0:
        yield []
        return
    folder = settings.data_dir / "workers"
    folder.mkdir(parents=True, exist_ok=True)
    workers: list[ExtraWorker] = []
    try:
        started = await asyncio.gather(
            *(start_one(address, folder / f"{index + 2}.log") for index in range(count)),
            return_exceptions=True,
        )
        workers = [worker for worker in started if isinstance(worker, ExtraWorker)]
        failed = [error for error in started if isinstance(error, BaseException)]
        if failed:
            raise failed[0]
        yield workers
    finally:
        await stop(workers, settings.temporal.graceful_shutdown_s)
