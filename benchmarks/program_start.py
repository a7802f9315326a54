"""One native runner life (workflows/providers/common/runner.c, a `true` agent) with the runner
built by the system's C compiler (linked against glibc, dynamically) against one with it built by
musl-gcc (static): what each `local` start pays for its runner, and for its launcher, which is
built the same way (native_runner.py).

Each try runs the runner on the host with its state and logs in a fresh folder; tries alternate
so both see the same load. The CPU is the children's rusage: the runner and the agent it waited
for. Prints the median wall and CPU time per start of each and musl ÷ glibc.

    .venv/bin/python benchmarks/program_start.py [--starts 400] [--write]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, children_cpu, median_table
from results_file import write_section

from workflows.providers.common.native_runner import SOURCE, built, require_usage, toolchains

WAYS = ("system compiler, glibc (dynamic)", "musl-gcc, static")


def one_start(runner: Path, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one runner life with a `true` agent."""
    folder.mkdir()
    argv = [str(runner), "--out", str(folder), "--cwd", str(folder), "--timeout", "30",
            "--log-limit", str(1 << 20), "--", "true"]  # fmt: skip
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    return time.perf_counter() - wall, children_cpu() - cpu


def programs(folder: Path) -> dict[str, Path]:
    chain = toolchains()
    musl = [t for t in chain if "-static" in t.flags]
    system = [t for t in chain if "-static" not in t.flags]
    if not (musl and system):
        raise SystemExit("program_start.py needs musl-gcc (musl-tools) and a C compiler")
    built_by = (system[0], musl[0])
    return {
        way: built(folder, SOURCE, by, require_usage)
        for way, by in zip(WAYS, built_by, strict=True)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=400, help="starts of each")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    timings: Timings = {name: ([], []) for name in WAYS}
    with tempfile.TemporaryDirectory(prefix="program-start-") as scratch:
        runners = programs(Path(scratch) / "bin")
        for start in range(2 * args.starts):
            name = WAYS[start % 2] if start % 4 < 2 else WAYS[1 - start % 2]  # AB BA AB …
            wall, cpu = one_start(runners[name], Path(scratch) / f"start-{start}")
            timings[name][0].append(wall)
            timings[name][1].append(cpu)
    lines = median_table("runner built by", "start", timings, args.starts, decimals=2)
    print("\n".join(lines))
    if args.write:
        write_section("program-start", "\n".join(lines))


if __name__ == "__main__":
    main()
