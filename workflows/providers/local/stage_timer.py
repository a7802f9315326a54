"""Per-stage durations of `local` sandboxes, for benchmarks (benchmarks/orchestration.py).

A provider has no timer unless one is given (`LocalProvider.timer`); then each stage of a sandbox's
life (disk, mkfs, mount, cgroup, bwrap start, usage, teardown steps) adds one sample per sandbox.
Nothing is recorded, and nothing costs, without one.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageSummary:
    stage: str
    count: int
    mean_ms: float
    p95_ms: float
    total_s: float


@dataclass
class StageTimer:
    """Durations in seconds by stage name, in the order stages were first seen."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.samples.setdefault(name, []).append(time.perf_counter() - started)

    def summary(self) -> list[StageSummary]:
        return [summarize(name, values) for name, values in self.samples.items() if values]


def summarize(name: str, values: list[float]) -> StageSummary:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    total = sum(ordered)
    return StageSummary(name, len(ordered), 1000 * total / len(ordered), 1000 * p95, total)


def timed(timer: StageTimer | None, name: str) -> contextlib.AbstractContextManager[None]:
    """`timer.stage(name)`, or nothing when there is no timer."""
    return contextlib.nullcontext() if timer is None else timer.stage(name)
