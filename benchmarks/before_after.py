"""The orchestration benchmark at two commits, alternated in one run: did a change (a refactor)
move the engine's figure beyond noise?

Each round runs `benchmarks/orchestration.py --skip-baseline` once on the `--before` commit (a
temporary git worktree) and once on the working tree, alternating which goes first, on the same
machine. Prints a row per run and the median of each side with the ratio after ÷ before — a ratio
from the same run, because these machines are shared and noisy. Usage:

    .venv/bin/python benchmarks/before_after.py --before REV [--rounds 3] [--write]
        [--section before-after-NAME] [-- ORCHESTRATION ARGS, e.g. --cases 100 --provider local]

`--section` names the RESULTS.md section `--write` replaces (default `before-after`, the
engine's), so a comparison of another path keeps its own.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_figures import busy_cpu_s, host_and_load
from results_file import write_section

ROOT = Path(__file__).resolve().parents[1]
SECTION = "before-after"
FIGURES = {
    "wall_s": re.compile(r"^wall time: ([\d.]+) s$", re.M),
    "events": re.compile(r"^history events per cell: ([\d.]+)$", re.M),
    "stored": re.compile(r"^stored results: (\d+) ", re.M),
}


@dataclass(frozen=True)
class Run:
    side: str  # "before" or "after"
    commit: str
    wall_s: float
    events: float
    stored: int
    cpu_ms_per_cell: float  # the whole machine's busy CPU time while it ran, over stored cells


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def orchestration(tree: Path, side: str, extra: list[str]) -> Run:
    """One benchmark run with `tree`'s code (its packages first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script = tree / "benchmarks" / "orchestration.py"
    busy = busy_cpu_s()
    done = subprocess.run(
        [sys.executable, str(script), "--skip-baseline", *extra],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    busy = busy_cpu_s() - busy
    if done.returncode != 0:
        raise SystemExit(f"{side}: orchestration.py failed:\n{done.stderr[-3000:]}")
    figures = {name: pattern.search(done.stdout) for name, pattern in FIGURES.items()}
    missing = [name for name, found in figures.items() if found is None]
    if missing:
        raise SystemExit(f"{side}: no {', '.join(missing)} in:\n{done.stdout[-2000:]}")
    values = {name: found.group(1) for name, found in figures.items() if found is not None}
    commit = git("rev-parse", "--short=7", "HEAD", cwd=tree)
    wall_s, events, stored = float(values["wall_s"]), float(values["events"]), int(values["stored"])
    return Run(side, commit, wall_s, events, stored, 1000 * busy / max(stored, 1))


def section(runs: list[Run], before: str, extra: list[str], name: str = SECTION) -> str:
    # medians of the figures as the rows print them, so that the summary is derived from the rows
    medians = {
        side: statistics.median(round(r.wall_s, 1) for r in runs if r.side == side)
        for side in ("before", "after")
    }
    cpu = {
        side: statistics.median(round(r.cpu_ms_per_cell, 1) for r in runs if r.side == side)
        for side in ("before", "after")
    }
    machine = host_and_load()
    lines = [
        "### Before and after a change (benchmarks/before_after.py)",
        "",
        f"`.venv/bin/python benchmarks/before_after.py --before {before}"
        + (f" --section {name}" if name != SECTION else "")
        + (f" -- {' '.join(extra)}`" if extra else "`"),
        f"Run {datetime.date.today().isoformat()} on {machine}: "
        f"{len(runs) // 2} rounds, the two sides alternated.",
        "",
        "| run | side | commit | wall | history events per cell | stored results "
        "| machine CPU per cell |",
        "|---:|---|---|---:|---:|---:|---:|",
        *(
            f"| {i} | {r.side} | {r.commit} | {r.wall_s:.1f} s | {r.events:.1f} | {r.stored} "
            f"| {r.cpu_ms_per_cell:.1f} ms |"
            for i, r in enumerate(runs, 1)
        ),
        "",
        f"Median wall time: before {medians['before']:.1f} s, after {medians['after']:.1f} s; "
        f"after ÷ before = {medians['after'] / medians['before']:.2f}.",
        f"Median machine CPU per cell (every process, /proc/stat, the run's start-up included): "
        f"before {cpu['before']:.1f} ms, after {cpu['after']:.1f} ms; "
        f"after ÷ before = {cpu['after'] / cpu['before']:.2f}.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--section", default=SECTION, help="the section --write replaces")
    parser.add_argument("extra", nargs="*", help="arguments for orchestration.py (after --)")
    options = parser.parse_args()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="evalbot-before-") as folder:
        tree = Path(folder) / "tree"
        git("worktree", "add", "--detach", str(tree), options.before)
        try:
            sides = [("before", tree), ("after", ROOT)]
            for round_ in range(options.rounds):
                for side, where in sides if round_ % 2 == 0 else sides[::-1]:
                    runs.append(orchestration(where, side, options.extra))
                    print(runs[-1], flush=True)
        finally:
            git("worktree", "remove", "--force", str(tree))
    text = section(runs, options.before, options.extra, options.section)
    print(text)
    if options.write:
        write_section(options.section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
