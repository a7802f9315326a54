"""What each of bubblewrap's options costs a `local` sandbox start, the kernel's clean-up included.

A `local` start is mostly its bubblewrap (benchmarks/RESULTS.md, "isolation-cost"). This script
makes one sandbox with the product's LocalProvider (as isolation_cost.py does) and launches, in
the foreground, the sandbox's own bubblewrap command line (LocalSandbox.bwrap: namespaces, the
shared /etc, /proc, /dev, /tmp, the binds, the seccomp filter) running `/usr/bin/true`, and the
same line with one option left out at a time; then bubblewrap binding only `/`, bubblewrap
printing its version (the program's start and nothing else) and `true` alone (the cost of a
launch from Python, which every row holds).

Part of a start's cost is paid after it, in kernel threads: a network namespace, for one, is
freed by the kernel's `cleanup_net` worker. The children's rusage misses that, so each row is
also timed by the machine's busy time (/proc/stat, every CPU, all but idle and iowait, as
before_after.py counts it) over a block of launches, and a pause after it for those threads. The
rows take turns by block, so all see the same load; the script prints each row's figures per
launch, and what each option adds (the full line less the line without it). The launches run
outside the sandbox's cgroup and from the host's mount namespace, whose table holds about twenty
mounts here, as the launch namespace's does (docs/sandbox.md, "Start-up cost"). Needs root and a
C compiler.

    .venv/bin/python benchmarks/bwrap_options.py [--blocks 12] [--per-block 40] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import children_cpu
from bench_figures import busy_cpu_s, commit, host, load
from isolation_cost import Sandbox, sandbox_scratch
from results_file import write_section

from workflows.providers.local.local_provider import SANDBOX_DIRS, close_fds, seccomp_memfd

TRUE = "/usr/bin/true"
SETTLE_S = 0.2
Argv = list[str]


def without(argv: Sequence[str], option: str, values: int) -> Argv:
    """`argv` with every `option` and the `values` arguments after it left out."""
    kept: Argv = []
    skip = 0
    for index, word in enumerate(argv):
        if skip:
            skip -= 1
        elif word == option and "--" not in argv[:index]:
            skip = values
        else:
            kept.append(word)
    return kept


def without_all(argv: Sequence[str], *options: tuple[str, int]) -> Argv:
    kept = list(argv)
    for option, values in options:
        kept = without(kept, option, values)
    return kept


def without_binds(argv: Sequence[str], dests: Sequence[str]) -> Argv:
    """`argv` without the binds (`--bind`, `--ro-bind`) whose destination is one of `dests`."""
    kept: Argv = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in ("--bind", "--ro-bind") and argv[index + 2] in dests:
            index += 3
            continue
        kept.append(word)
        index += 1
    return kept


def without_tmp(argv: Sequence[str]) -> Argv:
    """`argv` without its `/tmp` tmpfs and the `--perms`/`--size` given with it."""
    at = next(i for i in range(len(argv) - 1) if argv[i : i + 2] == ["--tmpfs", "/tmp"])
    if [argv[at - 4], argv[at - 2]] != ["--perms", "--size"]:
        raise ValueError(f"not the /tmp of BwrapCommand.argv: {argv[at - 4 : at + 2]}")
    return [*argv[: at - 4], *argv[at + 2 :]]


def with_value(argv: Sequence[str], option: str, value: str) -> Argv:
    """`argv` with the first `option` given `value` instead of its own."""
    at = argv.index(option)
    return [*argv[: at + 1], value, *argv[at + 2 :]]


def variants(full: Argv) -> dict[str, Argv]:
    """The rows: the sandbox's line, the line less one option, and the bare baselines."""
    sandbox_dirs = list(SANDBOX_DIRS.values())
    return {
        "the sandbox's bubblewrap line, `true` inside": full,
        "… without `--unshare-net`": without(full, "--unshare-net", 0),
        "… without `--unshare-ipc`, `--unshare-uts` (and its `--hostname`), `--unshare-cgroup`": (
            without_all(
                full,
                ("--unshare-ipc", 0),
                ("--unshare-uts", 0),
                ("--hostname", 1),
                ("--unshare-cgroup", 0),
            )
        ),
        "… without `--dev /dev`": without(full, "--dev", 1),
        "… without `--proc /proc`": without(full, "--proc", 1),
        "… without the `/tmp` tmpfs": without_tmp(full),
        "… without /repo, /world, /case, /out": with_value(
            without_binds(full, sandbox_dirs), "--chdir", "/"
        ),
        "… without the seccomp filter": without(full, "--seccomp", 1),
        "bubblewrap binding only `/`": ["bwrap", "--ro-bind", "/", "/", TRUE],
        "bubblewrap printing its version": ["bwrap", "--version"],
        "`true` alone": [TRUE],
    }


def launch_block(argv: Argv, count: int, filter_fd: int | None) -> tuple[float, float, float]:
    """Wall, children's CPU and machine busy seconds of `count` launches of `argv`."""
    fds = [filter_fd] if filter_fd is not None and "--seccomp" in argv else []
    wall, cpu, busy = time.perf_counter(), children_cpu(), busy_cpu_s()
    for _ in range(count):
        if fds:
            os.lseek(fds[0], 0, os.SEEK_SET)  # bubblewrap reads the filter from where it is
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       pass_fds=fds)  # fmt: skip
    wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
    time.sleep(SETTLE_S)  # the kernel threads' clean-up after the last launches, in this block
    return wall, cpu, busy_cpu_s() - busy


Rows = dict[str, list[tuple[float, float, float]]]


def measure(sandbox: Sandbox, blocks: int, per_block: int) -> Rows:
    filter_fd = seccomp_memfd()
    command = sandbox.sandbox.bwrap(as_pid_1=True, seccomp_fd=filter_fd, drops_itself=True)
    rows = variants(command.argv([TRUE]))
    if filter_fd is None:  # no filter for this architecture: no row without it
        del rows["… without the seccomp filter"]
    timings: Rows = {name: [] for name in rows}
    try:
        for argv in rows.values():  # one launch each first: a line that fails stops here
            launch_block(argv, 1, filter_fd)
        for _ in range(blocks):
            for name, argv in rows.items():
                wall, cpu, busy = launch_block(argv, per_block, filter_fd)
                timings[name].append((wall / per_block, cpu / per_block, busy / per_block))
    finally:
        close_fds(filter_fd)
    return timings


def figures(blocks: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """Milliseconds per launch: the median block's wall and children's CPU, and the machine's
    busy time over all blocks (its clock ticks every 10 ms, too coarse for one block's median)."""
    walls, cpus, busies = zip(*blocks, strict=True)
    return (
        1000 * statistics.median(walls),
        1000 * statistics.median(cpus),
        1000 * statistics.mean(busies),
    )


def table_lines(timings: Rows, blocks: int, per_block: int) -> list[str]:
    rows = {name: figures(values) for name, values in timings.items()}
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {host()} · commit {commit()} "
        f"· {load()} · {blocks} blocks of {per_block} launches of each row, taking turns; "
        "wall and children's CPU: the median block's, busy time: all blocks', per launch",
        "",
        "| launched | wall | children's CPU | machine's busy time |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {wall:.2f} ms | {cpu:.2f} ms | {busy:.2f} ms |"
        for name, (wall, cpu, busy) in rows.items()
    ]
    full_name, *others = rows
    _, full_cpu, full_busy = rows[full_name]
    lines += [
        "",
        "What each option adds to the sandbox's line (its row less the line without it):",
        "",
    ]
    for name in others:
        if name.startswith("…"):
            _, cpu, busy = rows[name]
            what = name.removeprefix("… without ")
            lines.append(
                f"- {what}: {full_cpu - cpu:.2f} ms of the children's CPU, "
                f"{full_busy - busy:.2f} ms of the machine's busy time"
            )
    bare, version, alone = (rows[name][2] for name in others[-3:])
    lines += [
        "",
        f"Of the sandbox's line's busy time, bubblewrap binding only `/` is "
        f"{bare / full_busy:.2f}, bubblewrap printing its version {version / full_busy:.2f} "
        f"and `true` alone {alone / full_busy:.2f}.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=12, help="blocks of launches of each row")
    parser.add_argument("--per-block", type=int, default=40, help="launches in a block")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bwrap_options.py needs root (bubblewrap as root, a loop-mounted disk)")
    with sandbox_scratch("bwrap-options-") as scratch, Sandbox(scratch) as sandbox:
        timings = measure(sandbox, args.blocks, args.per_block)
    lines = table_lines(timings, args.blocks, args.per_block)
    print("\n".join(lines))
    if args.write:
        write_section("bwrap-options", "\n".join(lines))


if __name__ == "__main__":
    main()
