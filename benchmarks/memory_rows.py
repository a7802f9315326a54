"""Memory at two experiment sizes: benchmarks/orchestration.py `--workers 2 --memory
--skip-baseline` at 2,000 cells (100 cases × 4 arms × 5 trials) and at 20,000 (1,000 cases), one
after the other, each in its own process with its own dev server. Prints a row per size (wall,
cells per second, the peak RSS of the benchmark process, of the extra `evalbot worker` process and
of the dev server, the largest workflow history, the load) and issue 24's memory goal derived from
the rows: the extra worker's peak at the larger size within 1.5× of its peak at the smaller.
Usage:

    .venv/bin/python benchmarks/memory_rows.py [--cases 100 1000] [--write]
        [-- ORCHESTRATION OPTIONS, e.g. --provider process]

`--write` puts the rows in benchmarks/RESULTS.md, section "memory".
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench_figures import host
from results_file import write_section
from workers_curve import figure

HERE = Path(__file__).resolve().parent
GOAL = 1.5  # issue 24: worker peak RSS at 20,000 cells within 1.5× of that at 2,000


@dataclass(frozen=True)
class Row:
    cases: int
    output: str

    def value(self, label: str) -> str:
        return figure(self.output, label)

    def megabytes(self, label: str) -> int:
        return int(self.value(label).split()[0])

    @property
    def cells(self) -> int:
        return int(self.value("cells").split()[0])


WORKER = "peak RSS, largest extra `evalbot worker` process"
OWN = "peak RSS, benchmark process (in-process worker, client)"
SERVER = "peak RSS, Temporal dev server"
HISTORY = "largest workflow history (the experiment's and 40 sampled run workflows')"


def measure(cases: int, extra: list[str]) -> Row:
    command = [sys.executable, str(HERE / "orchestration.py"), "--workers", "2", "--memory"]
    command += ["--skip-baseline", "--cases", str(cases), *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return Row(cases, done.stdout)


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| cells | commit | wall | cells/s | benchmark process (worker + client) peak RSS "
        "| extra `evalbot worker` peak RSS | dev server peak RSS | largest history | stored "
        "| load before → after |",
        "|---:|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for row in rows:
        machine = row.value("machine")
        commit = re.search(r"commit (\S+);", machine)
        after = machine.rsplit("after: ", 1)[-1]
        lines.append(
            f"| {row.cells:,} | {commit.group(1) if commit else '?'} | {row.value('wall time')} "
            f"| {row.value('cells per second')} | {row.megabytes(OWN)} MB "
            f"| {row.megabytes(WORKER)} MB | {row.megabytes(SERVER)} MB "
            f"| {row.value(HISTORY)} | {row.value('stored results')} "
            f"| {row.value('before')} → {after} |"
        )
    return lines


def goal_line(rows: list[Row]) -> str:
    small, large = min(rows, key=lambda r: r.cells), max(rows, key=lambda r: r.cells)
    ratio = large.megabytes(WORKER) / small.megabytes(WORKER)
    verdict = "met" if ratio <= GOAL else "not met"
    return (
        f"- extra `evalbot worker` peak RSS at {large.cells:,} cells ÷ at {small.cells:,}: "
        f"{ratio:.2f} (goal ≤ {GOAL}): {verdict}"
    )


def section(rows: list[Row], extra: list[str]) -> str:
    command = "`.venv/bin/python benchmarks/memory_rows.py --write"
    command += f"{' -- ' + ' '.join(extra) if extra else ''}`"
    finished = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    header = f"{finished} (when the last size finished) · {host()}"
    return "\n".join([command, "", header, "", *table(rows), "", goal_line(rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("extra", nargs="*", help="orchestration.py options (after --)")
    options = parser.parse_args()
    rows = []
    for cases in options.cases:
        rows.append(measure(cases, options.extra))
        print(f"done: {rows[-1].cells:,} cells", flush=True)
    text = section(rows, options.extra)
    print(text)
    if options.write:
        write_section("memory", text)


if __name__ == "__main__":
    main()
