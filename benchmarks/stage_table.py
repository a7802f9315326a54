"""The per-stage table of `local` sandboxes (workflows/providers/local/stage_timer.py)."""

from __future__ import annotations

from workflows.providers.local.stage_timer import StageTimer


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
