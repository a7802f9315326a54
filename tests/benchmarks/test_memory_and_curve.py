"""benchmarks/memory_sampler.py and benchmarks/workers_curve.py: the sampler finds a real child
process by its command line and reads its memory; the curve's parsing and plot follow the
figures orchestration.py prints.

Broken builds caught: a sampler that looks only at direct children or misreads /proc (no worker
peak), one that counts agent runners as workers, a parser that takes the wrong line, a plot whose
points do not follow the figures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.dom.minidom
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HOLD = "import sys, time; sys.stdout.write('x'); sys.stdout.flush(); time.sleep(30)"


@pytest.fixture
def modules(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import memory_sampler
    import workers_curve

    return memory_sampler, workers_curve


@pytest.fixture
def grandchild_worker() -> Iterator[subprocess.Popen[bytes]]:
    """A shell whose child's command line reads like `evalbot worker` (a grandchild of ours)."""
    inner = f'{sys.executable} -c "{HOLD}" bot worker'
    shell = subprocess.Popen(["sh", "-c", f"{inner}; true"], stdout=subprocess.PIPE)
    assert shell.stdout is not None and shell.stdout.read(1) == b"x"  # the grandchild is up
    yield shell
    for child in Path(f"/proc/{shell.pid}/task/{shell.pid}/children").read_text().split():
        os.kill(int(child), signal.SIGKILL)
    shell.wait(timeout=10)


def test_the_sampler_finds_a_grandchild_worker_and_its_memory(
    modules: tuple[ModuleType, ModuleType], grandchild_worker: subprocess.Popen[bytes]
) -> None:
    sampler, _ = modules
    # a session's Temporal dev server may already be our child when other tests ran first
    servers = [p for p in sampler.descendants(os.getpid()) if sampler.role(p) == "server"]
    with sampler.sampled(interval_s=0.05) as peaks:
        time.sleep(0.3)
    assert peaks.worker > 1024 * 1024  # a Python interpreter: megabytes, read from VmRSS
    assert peaks.own > peaks.worker / 2
    assert (peaks.server > 1024 * 1024) if servers else (peaks.server == 0)
    assert peaks.samples >= 2


def test_other_children_are_not_counted_as_workers(modules: tuple[ModuleType, ModuleType]) -> None:
    sampler, _ = modules
    runner = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE)
    try:
        assert runner.stdout is not None and runner.stdout.read(1) == b"x"
        assert str(runner.pid) in sampler.descendants(sampler.os.getpid())
        assert sampler.role(str(runner.pid)) is None
        peaks = sampler.Peaks()
        peaks.sample(sampler.os.getpid())
        assert peaks.worker == 0
    finally:
        runner.kill()
        runner.wait()


OUTPUT = """machine: vm x86_64, 2 cores; commit abc1234; after: load 3.00 2.00 1.00
cells: 2000 (100 cases x 4 arms x 5 trials), provider process
wall time: 50.0 s
cells per second: 40.0
history events per cell: 9.1
"""


def test_the_curve_reads_the_figures_and_plots_them(modules: tuple[ModuleType, ModuleType]) -> None:
    _, curve = modules
    assert curve.figure(OUTPUT, "cells per second") == "40.0"
    assert curve.figure(OUTPUT, "cells").startswith("2000 (100 cases")
    with pytest.raises(SystemExit, match="no 'peak RSS' line"):
        curve.figure(OUTPUT, "peak RSS")
    points = [curve.Point(1, 50.0, 40.0, OUTPUT), curve.Point(2, 40.0, 50.0, OUTPUT)]
    plot = xml.dom.minidom.parseString(curve.svg(points, "t"))
    dots = plot.getElementsByTagName("circle")
    heights = [float(d.getAttribute("cy")) for d in dots]
    assert len(dots) == 2 and heights[1] < heights[0]  # more cells/s is higher on the page
    labels = [t.firstChild.nodeValue for t in plot.getElementsByTagName("text") if t.firstChild]
    assert "40.0" in labels and "50.0" in labels


def curve_output(wall: float, rate: float, load_before: str) -> str:
    return (
        f"before: load {load_before}\n"
        "machine: vm x86_64, 2 cores; commit abc1234; after: load 3.00 2.00 1.00\n"
        "cells: 2000 (100 cases x 4 arms x 5 trials), provider process\n"
        "stored results: 2000 {'scored': 2000}; scored 2000\n"
        f"wall time: {wall} s\ncells per second: {rate}\n"
    )


def test_the_written_section_is_the_points_with_their_ratio(
    modules: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    _, curve = modules
    points = [
        curve.Point(1, 50.0, 40.0, curve_output(50.0, 40.0, "0.50 0.40 0.30")),
        curve.Point(2, 40.0, 50.0, curve_output(40.0, 50.0, "1.50 0.60 0.40")),
    ]
    text = curve.section(points, ["--provider", "process"], tmp_path / "plot.svg")
    assert "`.venv/bin/python benchmarks/workers_curve.py --workers 1 2 --write -- " in text
    assert "vm x86_64, 2 cores; commit abc1234; 2000 (100 cases" in text
    assert "; temporary folder /" in text
    assert (
        "| 1 | 50.0 s | 40.0 | 1.00x | 2000 | load 0.50 0.40 0.30 | load 3.00 2.00 1.00 |" in text
    )
    assert "| 2 | 40.0 s | 50.0 | 1.25x | 2000 | load 1.50 0.60 0.40 |" in text
    assert "[plot.svg](plot.svg)" in text
