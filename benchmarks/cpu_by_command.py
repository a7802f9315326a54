"""Where a `local` cell's CPU goes beyond a `process` cell's: the machine's CPU per cell by command.

Runs benchmarks/orchestration.py (`--skip-baseline`) with `--provider process` and then `local`,
`--rounds` times, taking turns, each under `perf record -a` (every CPU, every process, 499 samples
a second), and counts the samples by the command's name (`perf script`): the worker, bubblewrap,
the launcher, the runner, the agent's shell, the Temporal server, the kernel's worker threads and
so on; samples of the idle task are left out. The worker (the benchmark's own process: the Python
process with the most samples) is split into its interpreter and libraries (user space) and the
kernel work of its system calls (mounts, cgroup folders, files); other Python processes are one
row (the `process` provider's spawner among them; `local`'s runs the system's `python3`); the
worker's threads with names of their own (the Temporal SDK core's `tokio-rt-worker`) are rows of
their own. Each row's samples over all rounds become milliseconds of CPU per cell, and the table
ranks the rows by how much `local` changes them. A run's start-up (the dev server, the native
programs' build) is in both columns alike. The figures are the sampler's, so they are as rough as
a sample count: compare rows within one run. Needs root and `perf` (Debian: linux-perf).

    .venv/bin/python benchmarks/cpu_by_command.py [--rounds 2] [--cases 50] [--tmpdir DIR]
        [--write]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from bench_figures import commit, host, load
from results_file import write_section

ROOT = Path(__file__).resolve().parents[1]
HZ = 499
PROVIDERS = ("process", "local")
CELLS_PER_CASE = 4 * 5  # orchestration.py's arms × trials
IDLE = "swapper"
SHOWN = 14  # rows of the table; the rest are summed in "other"
Samples = collections.Counter[str]


def command_name(comm: str) -> str | None:
    """The row of a command: its name without the per-instance suffix (`kworker/u8:3-events` and
    `kworker/0:1` are `kworker`; `runner-c35535df` is `runner`); None for the idle task."""
    name = re.sub(r"[-:/].*", "", comm) or comm
    return None if name == IDLE else name


def parse_script(text: str) -> Samples:
    """Samples per row from `perf script -F comm,pid,ip,dso` lines (`python 7059 7f5e3 (/usr/lib/
    libpython3.11.so.1.0)`). The worker is the Python process with the most samples; its samples
    are split by user and kernel space. Other Python processes (the `process` provider's spawner,
    helpers) are `python, other`."""
    by_process: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for line in text.splitlines():
        fields = line.rsplit(None, 3)
        if len(fields) == 4 and fields[1].isdigit():
            comm, pid, _, dso = fields
            space = "kernel" if dso == "([kernel.kallsyms])" else "user"
            by_process[comm.strip(), pid, space] += 1
    pythons: Samples = collections.Counter()
    for (comm, pid, _), count in by_process.items():
        if comm == "python":
            pythons[pid] += count
    worker = pythons.most_common(1)[0][0] if pythons else None
    counted: Samples = collections.Counter()
    for (comm, pid, space), count in by_process.items():
        if comm == "python":
            name: str | None = f"python, worker, {space}" if pid == worker else "python, other"
        else:
            name = command_name(comm)
        if name is not None:
            counted[name] += count
    return counted


def record(provider: str, cases: int, scratch: Path) -> Samples:
    data = scratch / f"{provider}.perf"
    orchestration = [sys.executable, str(ROOT / "benchmarks" / "orchestration.py")]
    argv = [*orchestration, "--provider", provider, "--skip-baseline", "--cases", str(cases)]
    perf = ["perf", "record", "-q", "-a", "-F", str(HZ), "-o", str(data), "--", *argv]
    done = subprocess.run(perf, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{provider}: perf or orchestration.py failed:\n{done.stderr[-3000:]}")
    stored = re.search(r"^stored results: (\d+) ", done.stdout, re.M)
    if stored is None or int(stored[1]) != cases * CELLS_PER_CASE:
        raise SystemExit(f"{provider}: not every cell was stored:\n{done.stdout[-2000:]}")
    script = ["perf", "script", "-i", str(data), "-F", "comm,pid,ip,dso"]
    text = subprocess.run(script, capture_output=True, text=True, check=True).stdout
    data.unlink()
    return parse_script(text)


def per_cell_ms(samples: int, cells: int) -> float:
    return 1000 * samples / HZ / cells


def table_lines(counted: dict[str, Samples], rounds: int, cases: int) -> list[str]:
    process, local = counted["process"], counted["local"]
    cells = rounds * cases * CELLS_PER_CASE
    folder = os.environ.get("TMPDIR", "/tmp")
    names = sorted(
        set(process) | set(local), key=lambda name: (-abs(local[name] - process[name]), name)
    )
    shown, rest = names[:SHOWN], names[SHOWN:]
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {host()} · commit {commit()} "
        f"· {load()} · {rounds} rounds of {cells // rounds:,} cells ({cases} cases × 4 arms × 5 "
        f"trials) on each provider, taking turns; temporary folder {folder}",
        "",
        "| command | `process`, ms of CPU per cell | `local`, ms of CPU per cell | `local` adds |",
        "|---|---:|---:|---:|",
    ]
    rows = [(name, process[name], local[name]) for name in shown]
    rows.append(("other", sum(process[n] for n in rest), sum(local[n] for n in rest)))
    rows.append(("all", sum(process.values()), sum(local.values())))
    for name, under, over in rows:
        a, b = per_cell_ms(under, cells), per_cell_ms(over, cells)
        lines.append(f"| {name} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
    lines += ["", *summary_lines(process, local)]
    return lines


def summary_lines(process: Samples, local: Samples) -> list[str]:
    added = sum(local.values()) - sum(process.values())
    worker = sum(local[n] - process[n] for n in ("python, worker, user", "python, worker, kernel"))
    bubblewrap = local["bwrap"] - process["bwrap"]
    return [
        f"Of what `local` adds, bubblewrap is {bubblewrap / added:.2f} and the worker's own "
        f"Python (its interpreter and its system calls) {worker / added:.2f}."
    ]


def measure(rounds: int, cases: int) -> dict[str, Samples]:
    counted: dict[str, Samples] = {provider: collections.Counter() for provider in PROVIDERS}
    with tempfile.TemporaryDirectory(prefix="cpu-by-command-") as scratch:
        for round_ in range(rounds):
            order: Iterable[str] = PROVIDERS if round_ % 2 == 0 else reversed(PROVIDERS)
            for provider in order:
                counted[provider] += record(provider, cases, Path(scratch))
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each provider")
    parser.add_argument("--cases", type=int, default=50, help="cases (× 4 arms × 5 trials each)")
    parser.add_argument("--tmpdir", help="TMPDIR of every run (its sandboxes and state)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--section", default="cpu-by-command", help="the section --write sets")
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("perf"):
        raise SystemExit("cpu_by_command.py needs root and perf (apt-get install linux-perf)")
    if args.tmpdir:
        os.environ["TMPDIR"] = args.tmpdir
    counted = measure(args.rounds, args.cases)
    lines = table_lines(counted, args.rounds, args.cases)
    print("\n".join(lines))
    if args.write:
        write_section(args.section, "\n".join(lines))


if __name__ == "__main__":
    main()
