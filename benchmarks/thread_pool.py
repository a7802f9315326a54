"""Where the worker's hops to its thread pool go during the orchestration benchmark
(benchmarks/orchestration.py, run in this process with --skip-baseline).

Every `asyncio.to_thread` of the run is timed in three parts: the wait in the pool's queue (from
the call to a thread starting the function), the run in the thread (which includes any wait for
Python's global lock between its system calls), and the way back to the event loop (from the
function's end to the caller resuming). Prints hops per cell, the mean, median and 95th
percentile of each part, and the functions that hold the pool's threads longest, in thread time
per cell. What the figures meant on this VM is in docs/sandbox.md ("Fewer hops to a thread").

    .venv/bin/python benchmarks/thread_pool.py [--provider local] [--cases 50]
        [-- ORCHESTRATION ARGS]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orchestration
from bench_figures import percentile

T = TypeVar("T")


@dataclass(frozen=True)
class Hop:
    function: str
    queued_s: float
    run_s: float
    back_s: float


class TimedHops:
    """A stand-in for asyncio.to_thread that records each hop (the default executor, as there)."""

    def __init__(self) -> None:
        self.hops: list[Hop] = []

    async def to_thread(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        loop, context = asyncio.get_running_loop(), contextvars.copy_context()
        marks: dict[str, float] = {}
        called = time.perf_counter()

        def timed() -> T:
            marks["start"] = time.perf_counter()
            try:
                return context.run(func, *args, **kwargs)
            finally:
                marks["end"] = time.perf_counter()

        result = await loop.run_in_executor(None, timed)
        back = time.perf_counter() - marks["end"]
        name = getattr(func, "__qualname__", type(func).__name__)
        self.hops.append(Hop(name, marks["start"] - called, marks["end"] - marks["start"], back))
        return result


def summary(hops: list[Hop], cells: int, top: int = 12) -> list[str]:
    """The table of hop parts and the functions by thread time per cell."""
    lines = [f"hops to the thread pool: {len(hops) / cells:.1f} per cell ({len(hops)} in all)"]
    lines += ["", "| part | mean ms | median ms | p95 ms |", "|---|---:|---:|---:|"]
    for part in ("queued_s", "run_s", "back_s"):
        values = [1000 * getattr(hop, part) for hop in hops]
        label = {"queued_s": "queued", "run_s": "run in a thread", "back_s": "back to the loop"}
        lines.append(
            f"| {label[part]} | {statistics.mean(values):.1f} | {percentile(values, 50):.1f} | "
            f"{percentile(values, 95):.1f} |"
        )
    by_function: dict[str, list[float]] = defaultdict(list)
    for hop in hops:
        by_function[hop.function].append(hop.run_s)
    ranked = sorted(by_function.items(), key=lambda item: -sum(item[1]))[:top]
    lines += [
        "",
        "| function | hops per cell | thread ms per cell | mean ms |",
        "|---|---:|---:|---:|",
    ]
    for name, runs in ranked:
        lines.append(
            f"| `{name}` | {len(runs) / cells:.2f} | {1000 * sum(runs) / cells:.1f} | "
            f"{1000 * statistics.mean(runs):.2f} |"
        )
    return lines


def run_timed(options: argparse.Namespace) -> list[Hop]:
    recorder = TimedHops()
    patched: Callable[..., Awaitable[Any]] = recorder.to_thread
    asyncio.to_thread = patched  # type: ignore[assignment]  # the benchmark's process only
    asyncio.run(orchestration.main(options))
    return recorder.hops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=["process", "local"], default="local")
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("rest", nargs="*", help="after --: more orchestration.py arguments")
    args = parser.parse_args()
    options = orchestration.argument_parser().parse_args(
        ["--provider", args.provider, "--cases", str(args.cases), "--skip-baseline", *args.rest]
    )
    hops = run_timed(options)
    print("\n".join(summary(hops, options.cases * options.arms * options.trials)))


if __name__ == "__main__":
    main()
