"""What one `process` run's runner costs, started the two ways the runner spawner can start it
(workflows/providers/spawner.py, docs/sandbox.md): a fork of the spawner that runs the Python
runner (`spawn`, where the host has no C compiler), and the native runner started through the
launcher with posix_spawn (`spawn_exec`, the way now).

Each run is the runner with a `true` agent, its state and logs in a fresh folder, waited for until
its state says "finished". The runners are detached (no child of this process), so their CPU is
read as the whole machine's busy time (/proc/stat) over a block of runs, divided by the runs:
blocks of `--runs` alternate between the two ways, `--blocks` of each, and the script prints the
median per run of each way's blocks and native ÷ forked.

    .venv/bin/python benchmarks/process_runner_start.py [--blocks 6] [--runs 100] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, median_table
from bench_figures import busy_cpu_s
from results_file import write_section

from workflows.providers.common.launch import wait_ready
from workflows.providers.common.native_runner import native_launcher, native_runner
from workflows.providers.spawner import RunnerSpawner

WAYS = ("forked Python runner", "native runner, launched")
ENV = {"PATH": "/usr/bin:/bin"}


async def one_run(spawner: RunnerSpawner, native: Path | None, out: Path) -> None:
    out.mkdir()
    argv = ["--out", str(out), "--cwd", str(out), "--timeout", "30", "--log-limit", "10000"]
    argv += ["--", "true"]
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        if native is None:
            await spawner.spawn(argv, env=ENV, log=out / "runner.log", ready_fd=write_fd)
        else:
            argv = [str(native), "--ready-fd", str(write_fd), *argv]
            await spawner.spawn_exec(argv, env=ENV, log=out / "runner.log", pass_fds=[write_fd])
    finally:
        os.close(write_fd)
    if not await wait_ready(read_fd, 30):
        raise SystemExit(f"a runner did not start: {(out / 'runner.log').read_text()}")
    state = out / ".state.json"
    for _ in range(30_000):  # about 30 s
        if b'"finished"' in state.read_bytes():
            return
        await asyncio.sleep(0.001)
    raise SystemExit(f"a runner did not finish: {state.read_text()}")


async def measure(blocks: int, runs: int, scratch: Path) -> Timings:
    native = native_runner(scratch / "bin")
    launcher = native_launcher(scratch / "bin")
    if native is None or launcher is None:
        raise SystemExit("process_runner_start.py needs a C compiler (see the warning above)")
    forked, launched = RunnerSpawner(sys.executable), RunnerSpawner(sys.executable)
    launched.launcher = launcher
    ways = {WAYS[0]: (forked, None), WAYS[1]: (launched, native)}
    timings: Timings = {name: ([], []) for name in ways}
    count = 0
    try:
        for block in range(2 * blocks):
            name = WAYS[block % 2] if block % 4 < 2 else WAYS[1 - block % 2]  # AB BA AB …
            spawner, program = ways[name]
            busy, wall = busy_cpu_s(), time.perf_counter()
            for _ in range(runs):
                count += 1
                await one_run(spawner, program, scratch / f"run-{count}")
            timings[name][0].append((time.perf_counter() - wall) / runs)
            timings[name][1].append((busy_cpu_s() - busy) / runs)
    finally:
        forked.close()
        launched.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=6, help="blocks of each way")
    parser.add_argument("--runs", type=int, default=100, help="runs per block")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="process-runner-") as scratch:
        timings = asyncio.run(measure(args.blocks, args.runs, Path(scratch)))
    lines = median_table("runner", "run", timings, args.blocks, decimals=2)
    lines[0] += f" (blocks of {args.runs} runs; CPU: the whole machine's, per run)"
    print("\n".join(lines))
    if args.write:
        write_section("process-runner-start", "\n".join(lines))


if __name__ == "__main__":
    main()
