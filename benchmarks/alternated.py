"""Two ways of doing one thing, tried alternately so that both see the same load: the table of
median wall and CPU time per try of each, and the second ÷ the first (runner_start.py,
world_copy.py)."""

from __future__ import annotations

import resource
import statistics
import time

from bench_figures import commit, host, load

Timings = dict[str, tuple[list[float], list[float]]]  # name -> (wall seconds, CPU seconds)


def cpu_seconds() -> float:
    """CPU seconds of this process and of the children waited for so far (user + system)."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    return mine.ru_utime + mine.ru_stime + children_cpu()


def children_cpu() -> float:
    """CPU seconds of the children waited for so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_table(what: str, per: str, timings: Timings, tries: int, decimals: int) -> list[str]:
    """`what`: the first column's title; `per`: one try, in words ("start", "copy"). Each side
    after the first is also given as a ratio of the first."""
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {host()} · commit {commit()} "
        f"· {load()} · {tries} tries of each, alternating",
        "",
        f"| {what} | median wall per {per} | median CPU per {per} |",
        "|---|---:|---:|",
    ]
    medians = []
    for name, (walls, cpus) in timings.items():
        wall_ms, cpu_ms = 1000 * statistics.median(walls), 1000 * statistics.median(cpus)
        medians.append((name, wall_ms, cpu_ms))
        lines.append(f"| {name} | {wall_ms:.{decimals}f} ms | {cpu_ms:.{decimals}f} ms |")
    (first, first_wall, first_cpu), *others = medians
    lines.append("")
    lines += [
        f"{name} ÷ {first}: wall {wall / first_wall:.2f}, CPU {cpu / first_cpu:.2f}."
        for name, wall, cpu in others
    ]
    return lines
