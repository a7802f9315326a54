"""benchmarks/thread_pool.py: each hop's three parts are timed where they happen, and the summary
ranks the functions by thread time per cell. Broken builds caught: the parts swapped or taken
from the wrong marks (a hop that queues behind a busy pool would show no queue), a ranking by
hop count instead of thread time, a figure per hop where one per cell is printed."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import thread_pool

    return thread_pool


async def test_a_hop_behind_a_busy_pool_is_timed_as_queued_then_run(script: ModuleType) -> None:
    recorder = script.TimedHops()
    release = threading.Event()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))
    blocker = asyncio.ensure_future(recorder.to_thread(release.wait))
    await asyncio.sleep(0.05)  # the one thread is now taken
    queued = asyncio.ensure_future(recorder.to_thread(time.sleep, 0.05))
    await asyncio.sleep(0.1)
    release.set()
    await asyncio.gather(blocker, queued)
    wait, sleep = recorder.hops
    assert (wait.function, sleep.function) == ("Event.wait", "sleep")
    assert wait.run_s >= 0.14 and wait.queued_s < 0.05
    assert sleep.queued_s >= 0.09 and 0.04 <= sleep.run_s < 0.09
    assert all(hop.back_s >= 0 for hop in recorder.hops)


def test_the_summary_ranks_functions_by_thread_time_per_cell(script: ModuleType) -> None:
    hops = [script.Hop("often", 0.010, 0.001, 0.002) for _ in range(40)]
    hops += [script.Hop("slow", 0.030, 0.100, 0.004) for _ in range(10)]
    lines = script.summary(hops, cells=10)
    assert lines[0] == "hops to the thread pool: 5.0 per cell (50 in all)"
    rows = [line for line in lines if line.startswith("| `")]
    assert rows == [
        "| `slow` | 1.00 | 100.0 | 100.00 |",  # 1 s of thread time over 10 cells
        "| `often` | 4.00 | 4.0 | 1.00 |",
    ]
    queued = next(line for line in lines if line.startswith("| queued"))
    assert queued == "| queued | 14.0 | 10.0 | 30.0 |"
