"""One runner start from source against one from its compiled bytecode, the way `local` sandboxes
start it (workflows/providers/local/compiled_runner.py); or, with `--before REV`, the compiled
runner of commit REV against this tree's (a before/after of a change to the runner).

Each start runs the whole runner on the host with the sandbox interpreter: `-I -S`, a trivial
agent (`true`), its state and logs written to a fresh folder. Starts alternate source, compiled,
source… so both see the same load; the script prints the median wall time and CPU time (the
interpreter and its agent, from the children's rusage) of each, and compiled ÷ source. Bubblewrap,
setpriv and the agent are the same for both, so they are left out.

    .venv/bin/python benchmarks/runner_start.py [--starts 60] [--before REV] [--write [--section N]]
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

from workflows.providers.common import RUNNER
from workflows.providers.local.compiled_runner import compiled_runner
from workflows.providers.local.local_provider import SANDBOX_PYTHON


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


def runners_to_compare(scratch: Path, before: str | None) -> dict[str, Path]:
    """Source and compiled; or REV's compiled runner and this tree's."""
    if before is None:
        runners = {"source": RUNNER, "compiled": compiled(scratch / "compiled", RUNNER)}
    else:
        old_source = scratch / "runner-before.py"
        relative = RUNNER.resolve().relative_to(Path(__file__).resolve().parents[1])
        show = ["git", "show", f"{before}:{relative.as_posix()}"]
        old_source.write_bytes(subprocess.run(show, check=True, capture_output=True).stdout)
        runners = {
            f"compiled, {before}": compiled(scratch / "before", old_source),
            "compiled, this tree": compiled(scratch / "after", RUNNER),
        }
    return runners


def compiled(folder: Path, source: Path) -> Path:
    made = compiled_runner(folder, SANDBOX_PYTHON, source)
    if made == source:
        raise SystemExit(f"{source} could not be compiled (see the warning above)")
    return made


def measure(starts: int, scratch: Path, before: str | None) -> Timings:
    runners = runners_to_compare(scratch, before)
    timings: Timings = {name: ([], []) for name in runners}
    for index in range(starts):
        for side, (name, runner) in enumerate(runners.items()):
            wall, cpu = one_start(runner, scratch / f"side{side}-{index}")
            timings[name][0].append(wall)
            timings[name][1].append(cpu)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=60, help="starts of each runner")
    parser.add_argument("--before", help="a commit whose runner to compare with this tree's")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--section", default="runner-start", help="RESULTS.md section to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runner-start-") as scratch:
        timings = measure(args.starts, Path(scratch), args.before)
        lines = median_table("runner", "start", timings, args.starts, decimals=1)
    print("\n".join(lines))
    if args.write:
        write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
