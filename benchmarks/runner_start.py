"""One runner start from source against one from its compiled bytecode, the way `local` sandboxes
start it (workflows/providers/local/compiled_runner.py).

Each start runs the whole runner on the host with the sandbox interpreter: `-I -S`, a trivial
agent (`true`), its state and logs written to a fresh folder. Starts alternate source, compiled,
source… so both see the same load; the script prints the median wall time and CPU time (the
interpreter and its agent, from the children's rusage) of each, and compiled ÷ source. Bubblewrap,
setpriv and the agent are the same for both, so they are left out.

    .venv/bin/python benchmarks/runner_start.py [--starts 60] [--write]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, median_table
from results_file import write_section

from workflows.providers.common import RUNNER
from workflows.providers.local.compiled_runner import compiled_runner
from workflows.providers.local.local_provider import SANDBOX_PYTHON


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_start(runner: Path, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one runner life with a `true` agent."""
    folder.mkdir()
    argv = [SANDBOX_PYTHON, "-I", "-S", str(runner), "--out", str(folder), "--cwd", str(folder),
            "--timeout", "30", "--log-limit", str(1 << 20), "--", "true"]  # fmt: skip
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
    if b'"finished"' not in (folder / ".state.json").read_bytes():
        raise SystemExit(f"{runner} did not finish its agent")
    return wall, cpu


def measure(starts: int, scratch: Path) -> Timings:
    runners = {"source": RUNNER, "compiled": compiled_runner(scratch / "compiled", SANDBOX_PYTHON)}
    if runners["compiled"] == RUNNER:
        raise SystemExit("the runner could not be compiled (see the warning above)")
    timings: Timings = {name: ([], []) for name in runners}
    for index in range(starts):
        for name, runner in runners.items():
            wall, cpu = one_start(runner, scratch / f"{name}-{index}")
            timings[name][0].append(wall)
            timings[name][1].append(cpu)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=60, help="starts of each runner")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runner-start-") as scratch:
        timings = measure(args.starts, Path(scratch))
        lines = median_table("runner", "start", timings, args.starts, decimals=1)
    print("\n".join(lines))
    if args.write:
        write_section("runner-start", "\n".join(lines))


if __name__ == "__main__":
    main()
