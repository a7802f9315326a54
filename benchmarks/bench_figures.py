"""Figures shared by the Modal benchmarks (benchmarks/modal.py, benchmarks/reset.py --provider
modal): percentiles, the check that the server's counts and the client's agree, the ratio of
paired timings, and where a run happened (date, machine, commit) for benchmarks/RESULTS.md."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "benchmarks/RESULTS.md"  # relative to ROOT: what the benchmarks write

# The server's count -> the client's (AdmissionStats) count of the same events.
AGREEING = {"created": "created", "refused": "rate_limited"}


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def disagreements(server: Mapping[str, Any], client: Mapping[str, Any]) -> list[str]:
    """Each count the server and the client both keep, where they differ: one phrase each.

    The server counts sandboxes it created and creations it refused (RESOURCE_EXHAUSTED); the
    provider's admission counts the creations that came back and the refusals it saw. The SDK
    does not retry a refused Sandbox.create, so every refusal reaches the client once."""
    return [
        f"{name}: server {server[name]}, client {client[theirs]}"
        for name, theirs in AGREEING.items()
        if server[name] != client[theirs]
    ]


def paired_ratios(slow: list[float], fast: list[float]) -> tuple[float, float, float]:
    """The median of slow/fast over pairs run back to back (same load), and its range."""
    if not slow or len(slow) != len(fast):
        raise ValueError(f"need as many fast timings as slow ones, got {len(slow)} and {len(fast)}")
    if min(fast) <= 0:
        raise ValueError(f"a timing of {min(fast)} s cannot divide: every timing must be positive")
    ratios = [s / f for s, f in zip(slow, fast, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def commit() -> str:
    """The short commit of the working tree, `+dirty` if it has changes other than to
    benchmarks/RESULTS.md (which the benchmarks themselves write)."""
    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{RESULTS}")
    return sha + ("+dirty" if changed else "")


def git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def host() -> str:
    """`vm x86_64, 2 cores`: the short machine line of the orchestration-side benchmarks."""
    return f"{platform.node()} {platform.machine()}, {os.cpu_count() or 1} cores"


def load() -> str:
    """`load 0.52 1.10 0.98`: these machines are shared, so every row carries it."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def host_and_load() -> str:
    """`x86_64, 2 cores, load avg 3.1`: the machine line of the before/after, calibration and
    reliability sections."""
    return f"{platform.machine()}, {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}"


def machine() -> str:
    """`2-core x86_64 VM (CPU model), 24 GB, load avg 3.1`: the figures depend on all of it."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return (
        f"{os.cpu_count()}-core {platform.machine()} ({model}), {memory_gb:.0f} GB, "
        f"load avg {os.getloadavg()[0]:.1f}"
    )


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def busy_cpu_s() -> float:
    """CPU seconds every CPU of the machine spent on anything but idling, since boot."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")
