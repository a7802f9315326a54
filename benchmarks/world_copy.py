"""A sandbox's world copy: the `cp -a --reflink=auto` process each sandbox used to start, against
the in-process copy that replaced it (workflows/providers/common/tree_copy.py).

Both copy the benchmarks' world (benchmarks/trivial_matter.py: one document and world.toml) from
a process that has imported the worker's modules, as a worker has: the `cp` side pays the fork of
a process that large, as a worker did. Copies alternate cp, in-process, cp… so both see the same
load; the script prints the median wall time and CPU time per copy (this process and the children
it waited for) and in-process ÷ cp.

    .venv/bin/python benchmarks/world_copy.py [--copies 300] [--write]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, cpu_seconds, median_table
from results_file import write_section
from trivial_matter import write_catalog

import workflows.engine.worker  # noqa: F401  (a worker-sized process: what cp's fork copied)
from workflows.providers.common.sandbox_layout import copy_world_blocking

Copy = Callable[[Path, Path], None]


def with_cp(source: Path, dest: Path) -> None:
    """What copy_world_blocking did before tree_copy.py."""
    argv = ["cp", "-a", "--reflink=auto", "--no-target-directory", "--", str(source), str(dest)]
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)


def in_process(source: Path, dest: Path) -> None:
    copy_world_blocking(source, dest)


def measure(copies: int, scratch: Path) -> Timings:
    write_catalog(scratch / "catalog", cases=1)
    world = scratch / "catalog" / "worlds" / "bench"
    sides: dict[str, Copy] = {"cp -a --reflink=auto": with_cp, "in-process": in_process}
    timings: Timings = {name: ([], []) for name in sides}
    for index in range(copies):
        for number, (name, copy) in enumerate(sides.items()):
            dest = scratch / f"copy-{number}-{index}"
            cpu, wall = cpu_seconds(), time.perf_counter()
            copy(world, dest)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            if (dest / "documents" / "fact.md").read_text() != "The answer is 42.\n":
                raise SystemExit(f"{name} did not copy the world")
            timings[name][0].append(wall)
            timings[name][1].append(cpu)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=300, help="copies of each kind")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="world-copy-") as scratch:
        timings = measure(args.copies, Path(scratch))
    lines = median_table("world copy", "copy", timings, args.copies, decimals=2)
    print("\n".join(lines))
    if args.write:
        write_section("world-copy", "\n".join(lines))


if __name__ == "__main__":
    main()
