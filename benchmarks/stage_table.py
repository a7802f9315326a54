"""The per-stage table of `local` sandboxes (workflows/providers/local/stage_timer.py), and the
machine line every benchmark row carries (load average included: these machines are shared)."""

from __future__ import annotations

import os
import platform

from bench_figures import commit as commit  # one commit line for every benchmark

from workflows.providers.local.stage_timer import StageTimer


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def machine() -> str:
    return f"{platform.node()} {platform.machine()}, {os.cpu_count() or 1} cores"


def stage_lines(timer: StageTimer, cells: int) -> list[str]:
    """A markdown table: per stage, samples, mean and p95 in ms, and the stage's total per cell."""
    lines = [
        "| stage | samples | mean ms | p95 ms | ms per cell (sum) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in timer.summary():
        per_cell = 1000 * row.total_s / max(cells, 1)
        lines.append(
            f"| {row.stage} | {row.count} | {row.mean_ms:.1f} | {row.p95_ms:.1f} | {per_cell:.1f} |"
        )
    return lines
