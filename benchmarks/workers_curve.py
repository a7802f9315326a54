"""The workers curve: benchmarks/orchestration.py at `--workers 1, 2, 4` (by default), back to back
in one run, each in its own process with its own dev server; prints cells per second per worker
count and the ratio to one worker, and writes an SVG plot (benchmarks/workers_curve.svg). Usage:

    .venv/bin/python benchmarks/workers_curve.py [--workers 1 2 4] [--svg PATH] [--write]
        [-- ORCHESTRATION OPTIONS, e.g. --provider process --cases 100 --memory]

`--write` puts the table in benchmarks/RESULTS.md, section "workers-curve" (`--section`).

A Python worker uses one core at most, so on a 2-core machine the curve flattens after two
workers (and earlier when the machine is shared): the plot says what the host allows, not the
engine's limit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from results_file import write_section

from workflows.file_systems import file_system_of

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Point:
    workers: int
    wall_s: float
    cells_per_s: float
    output: str


def figure(output: str, label: str) -> str:
    """The text after `label: ` on orchestration.py's output line that starts with it."""
    found = re.search(rf"^{re.escape(label)}: (.+)$", output, re.MULTILINE)
    if found is None:
        raise SystemExit(f"orchestration.py printed no '{label}' line; its output:\n{output}")
    return found.group(1)


def measure(workers: int, extra: list[str]) -> Point:
    """One orchestration.py run with `workers` worker processes (no naive baseline)."""
    command = [sys.executable, str(HERE / "orchestration.py"), "--workers", str(workers)]
    command += ["--skip-baseline", *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    wall = float(figure(done.stdout, "wall time").split()[0])
    rate = float(figure(done.stdout, "cells per second"))
    return Point(workers, wall, rate, done.stdout)


def svg(points: list[Point], title: str) -> str:
    """A line plot of cells/s against worker processes, with linear scaling from one worker
    dashed for reference."""
    width, height, left, right, top, bottom = 580, 340, 60, 50, 40, 50
    most = max(p.workers for p in points)
    base = points[0].cells_per_s / points[0].workers
    top_value = max(max(p.cells_per_s for p in points), base * most) * 1.1

    def x(workers: float) -> float:
        return left + (width - left - right) * (workers / most)

    def y(value: float) -> float:
        return height - bottom - (height - top - bottom) * (value / top_value)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>',
        f'<line x1="{left}" y1="{y(0)}" x2="{width - right}" y2="{y(0)}" stroke="black"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{top}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">worker processes</text>',
        f'<text x="15" y="{height / 2}" text-anchor="middle" '
        f'transform="rotate(-90 15 {height / 2})">cells per second</text>',
    ]
    for step in range(5):
        value = top_value * step / 4
        parts.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:.0f}</text>'
        )
    for p in points:
        parts.append(
            f'<text x="{x(p.workers):.1f}" y="{y(0) + 16}" text-anchor="middle">{p.workers}</text>'
        )
    ideal = " ".join(f"{x(w):.1f},{y(base * w):.1f}" for w in (points[0].workers, most))
    measured = " ".join(f"{x(p.workers):.1f},{y(p.cells_per_s):.1f}" for p in points)
    parts += [
        f'<polyline points="{ideal}" fill="none" stroke="gray" stroke-dasharray="5,4"/>',
        f'<polyline points="{measured}" fill="none" stroke="#1f77b4" stroke-width="2"/>',
        f'<text x="{x(most) - 4:.1f}" y="{y(base * most) - 6:.1f}" text-anchor="end" '
        f'fill="gray">linear from 1 worker</text>',
    ]
    for p in points:
        parts.append(f'<circle cx="{x(p.workers):.1f}" cy="{y(p.cells_per_s):.1f}" r="4" '
                     f'fill="#1f77b4"/>')  # fmt: skip
        parts.append(
            f'<text x="{x(p.workers) + 6:.1f}" y="{y(p.cells_per_s) + 16:.1f}">'
            f"{p.cells_per_s:.1f}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def table(points: list[Point]) -> list[str]:
    """One row per worker count; the ratio is cells/s against the first point's."""
    first = points[0]
    lines = [
        "| worker processes | wall | cells/s | vs 1 worker | stored results | load before "
        "| load after |",
        "|---:|---:|---:|---:|---|---|---|",
    ]
    for p in points:
        stored = figure(p.output, "stored results").split(" {")[0]
        after = figure(p.output, "machine").split("after: ")[-1]
        lines.append(
            f"| {p.workers} | {p.wall_s:.1f} s | {p.cells_per_s:.1f} | "
            f"{p.cells_per_s / first.cells_per_s:.2f}x | {stored} | {figure(p.output, 'before')} "
            f"| {after} |"
        )
    return lines


def section(points: list[Point], extra: list[str], svg_path: Path) -> str:
    first, scratch = points[0], tempfile.gettempdir()
    commit = re.search(r"commit (\S+);", figure(first.output, "machine"))
    command = ["--workers", *(str(p.workers) for p in points), "--write"]
    command += ["--", *extra] if extra else []
    header = f"`.venv/bin/python benchmarks/workers_curve.py {' '.join(command)}`"
    lines = [
        header,
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{figure(first.output, 'machine').split(';')[0]}; commit "
        f"{commit.group(1) if commit else 'unknown'}; {figure(first.output, 'cells')}; "
        f"temporary folder {scratch} ({file_system_of(scratch).describe()})",
        "",
        *table(points),
        "",
        f"Plot: [{svg_path.name}]({svg_path.name}) (dashed: linear from one worker).",
    ]
    peaks = [(p.workers, re.findall(r"^peak RSS.*$", p.output, re.MULTILINE)) for p in points]
    for workers, found in peaks:
        if found:
            lines += ["", f"{workers} worker process(es): " + "; ".join(found)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--svg", type=Path, default=HERE / "workers_curve.svg")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--section", default="workers-curve")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="orchestration.py options")
    options = parser.parse_args()
    extra = [a for a in options.extra if a != "--"]
    points = []
    for workers in options.workers:
        point = measure(workers, extra)
        print(f"--- {workers} worker process(es)\n{point.output.strip()}", flush=True)
        points.append(point)
    first = points[0]
    print(f"\nworkers curve ({figure(first.output, 'cells')}):")
    print("\n".join(table(points)))
    title = f"evalbot workers curve: {figure(first.output, 'cells')}"
    options.svg.write_text(svg(points, title.replace("&", "and")))
    print(f"plot: {options.svg}")
    if options.write:
        write_section(options.section, section(points, extra, options.svg))


if __name__ == "__main__":
    main()
