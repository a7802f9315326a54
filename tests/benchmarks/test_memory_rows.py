"""benchmarks/memory_rows.py: its rows and its goal line come from orchestration.py's output.

Broken builds caught: a goal computed from the benchmark process's peak instead of the extra
worker's, or from the rows in the wrong order; a row that takes a figure from the wrong line."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def memory_rows(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import memory_rows

    return memory_rows


def output(cells: int, wall: float, own: int, worker: int, server: int) -> str:
    """What orchestration.py --workers 2 --memory prints (the lines the script reads)."""
    return "\n".join(
        [
            "before: load 1.00 2.00 3.00",
            "machine: vm x86_64, 2 cores; commit abc1234; after: load 4.00 5.00 6.00",
            f"cells: {cells} ({cells // 20} cases x 4 arms x 5 trials), provider process",
            f"stored results: {cells} {{'scored': {cells}}}; scored {cells}",
            f"wall time: {wall} s",
            f"cells per second: {cells / wall:.1f}",
            f"peak RSS, benchmark process (in-process worker, client): {own} MB",
            f"peak RSS, largest extra `evalbot worker` process: {worker} MB",
            f"peak RSS, Temporal dev server: {server} MB",
            "RSS samples (1 s apart): 40",
            "largest workflow history (the experiment's and 40 sampled run workflows'): "
            f"exp-1: {cells // 2} events, {cells} KiB",
        ]
    )


def test_rows_and_goal_follow_the_printed_figures(memory_rows: ModuleType) -> None:
    large = memory_rows.Row(1000, output(20000, 400.0, own=180, worker=260, server=330))
    small = memory_rows.Row(100, output(2000, 40.0, own=120, worker=200, server=250))
    text = memory_rows.section([large, small], [])
    assert (
        "| 20,000 | abc1234 | 400.0 s | 50.0 | 180 MB | 260 MB | 330 MB "
        "| exp-1: 10000 events, 20000 KiB | 20000 {'scored': 20000}; scored 20000 "
        "| load 1.00 2.00 3.00 → load 4.00 5.00 6.00 |"
    ) in text
    # the worker's 260 / 200, not the benchmark process's 180 / 120, and large over small
    assert text.endswith("at 20,000 cells ÷ at 2,000: 1.30 (goal ≤ 1.5): met")


def test_a_worker_that_grows_with_the_cells_misses_the_goal(memory_rows: ModuleType) -> None:
    rows = [
        memory_rows.Row(100, output(2000, 40.0, own=100, worker=200, server=250)),
        memory_rows.Row(1000, output(20000, 400.0, own=100, worker=320, server=330)),
    ]
    assert memory_rows.goal_line(rows).endswith(": 1.60 (goal ≤ 1.5): not met")
