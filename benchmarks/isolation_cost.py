"""Where the CPU of one `local` sandbox start goes, and what the host's mount table adds to it.

A `local` cell starts bubblewrap, which starts the runner, pid 1 of the sandbox, which drops to
the sandbox's uid itself (docs/sandbox.md). The runner was a Python program (runner.py, compiled
to bytecode once per worker); it is now a native one where the host has a C compiler
(native_runner.py). This script makes one sandbox with the product's LocalProvider (its disk,
cgroup, /etc and world) and launches, with the sandbox's bubblewrap command line (namespaces,
shared /etc, binds, seccomp filter), four commands inside it:

- `true` under setpriv: bubblewrap and setpriv alone;
- `python3 -I -S -c pass` under setpriv: plus a bare interpreter start;
- the start as LocalSandbox.start builds it (`start_argv`) with the Python runner, a `true` agent
  (`--pid-namespace`, `--user`, a ready pipe, state and logs to /out): the start before;
- the same with the native runner: the start now.

Bubblewrap reads the whole mount table (/proc/self/mountinfo) after each of its binds, and
every `local` sandbox in flight adds its disk to that table. So each command is launched twice:
with the host's mount table as it is (the sandbox's own disk included), and with
`--extra-mounts` (default 128, the cells a worker has in flight) more loop-mounted ext4 disks, made
from a template as sandbox disks are. Launches alternate across the eight (command × table) so all
see the same load; the script prints the median wall and CPU time (the children's rusage:
bubblewrap and what it starts) of each, the differences between the commands (what each layer
adds, and what the native runner saves) and the ratio of the larger table to the smaller. The
launches run in the foreground and outside the sandbox's cgroup (placing a process there is the
worker's work, not the launch's). Needs root and a C compiler.

    .venv/bin/python benchmarks/isolation_cost.py [--launches 60] [--extra-mounts 128] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, children_cpu
from bench_figures import commit, host, load
from results_file import write_section

from workflows.providers.base import SandboxSpec
from workflows.providers.local.compiled_runner import compiled_runner
from workflows.providers.local.disk import format_image, sparse_copy
from workflows.providers.local.local_provider import (
    SANDBOX_PYTHON,
    LocalProvider,
    close_fds,
    seccomp_memfd,
)
from workflows.providers.local.loop_mount import mount_image, unmount

DISK_MB = 64


def mount_count() -> int:
    with open("/proc/self/mountinfo", "rb") as table:
        return sum(1 for _ in table)


class Sandbox:
    """One sandbox made by the product's LocalProvider (disk, cgroup, /etc, world), whose start
    command line (LocalSandbox.bwrap and runner_command, as LocalSandbox.start builds them) is
    launched again and again in the foreground, each time with an empty /out."""

    def __init__(self, scratch: Path) -> None:
        self.provider = LocalProvider(scratch / "sandboxes", scratch / "images")
        repo, world = scratch / "repo", scratch / "world"
        repo.mkdir()
        world.mkdir()
        spec = SandboxSpec(run_id="isolation-cost", image=str(repo), world_dir=world, case_files={})
        self.sandbox = asyncio.run(self.provider.create(spec))
        self.runners = {"native": self.provider.runner}
        if self.provider.runner.suffix:  # runner.py or its bytecode: no native runner here
            raise SystemExit("isolation_cost.py needs a C compiler (the native runner)")
        folder = self.provider.sandbox_dir / ".runner"
        self.runners["python runner"] = compiled_runner(folder, SANDBOX_PYTHON)

    def close(self) -> None:
        asyncio.run(self.sandbox.terminate())

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def argv(self, kind: str, ready_fd: int, filter_fd: int | None) -> list[str]:
        if kind in self.runners:  # the provider binds and runs the runner it holds
            self.provider.runner = self.runners[kind]
            return self.sandbox.start_argv("true", ready_fd, filter_fd)
        command = self.sandbox.bwrap(as_pid_1=True, seccomp_fd=filter_fd)
        inside = ["/usr/bin/true"] if kind == "true" else [SANDBOX_PYTHON, "-I", "-S", "-c", "pass"]
        return command.argv(self.provider.rlimits(self.sandbox.limits) + inside)

    def empty_out(self) -> None:
        out, uid = self.sandbox.layout.out, self.sandbox.uid
        shutil.rmtree(out)
        out.mkdir(mode=0o755)
        os.chown(out, uid, uid)

    def launch(self, kind: str) -> tuple[float, float]:
        """Wall and CPU seconds of one launch of `kind` ("true", "python", or a runner's name)."""
        self.empty_out()
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        filter_fd = seccomp_memfd()
        fds = [fd for fd in (write_fd, filter_fd) if fd is not None]
        argv = self.argv(kind, write_fd, filter_fd)
        try:
            cpu, wall = children_cpu(), time.perf_counter()
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, pass_fds=fds)
            wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
        finally:
            close_fds(*fds)
        with os.fdopen(read_fd, "rb") as ready:
            told = ready.read()
        state = self.sandbox.layout.out / ".state.json"
        if kind in self.runners and (not told or b'"finished"' not in state.read_bytes()):
            raise SystemExit("the runner did not tell it was ready or did not finish its agent")
        return wall, cpu


@contextlib.contextmanager
def sandbox_scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder for a benchmark's sandbox, which the sandbox's uid can reach."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        os.chmod(scratch, 0o755)  # the sandbox uid must reach the runner and the folders
        yield Path(scratch)


@contextlib.contextmanager
def extra_disks(folder: Path, count: int) -> Iterator[None]:
    """`count` loop-mounted ext4 disks, copies of one formatted template, for the block."""
    template = folder / "template.ext4"
    asyncio.run(format_image(template, DISK_MB))
    mounted: list[Path] = []
    try:
        for index in range(count):
            image, mountpoint = folder / f"{index}.ext4", folder / str(index)
            sparse_copy(template, image)
            mountpoint.mkdir()
            mount_image(image, mountpoint)
            mounted.append(mountpoint)
        yield
    finally:
        for mountpoint in mounted:
            unmount(mountpoint)


def measure(launches: int, extra: int, scratch: Path) -> tuple[Timings, dict[str, int]]:
    """Alternating launches of each command, with the mount table as it is and with `extra`
    more disks; also how many mounts each table had."""
    kinds = ("true", "python", "python runner", "native")
    timings: Timings = {}
    tables: dict[str, int] = {}

    def one_round(table: str) -> None:
        for kind in kinds:
            wall, cpu = sandbox.launch(kind)
            walls, cpus = timings.setdefault(f"{kind}|{table}", ([], []))
            walls.append(wall)
            cpus.append(cpu)

    (scratch / "disks").mkdir()
    as_is, more = "as is", f"+{extra} disks"
    with Sandbox(scratch) as sandbox:
        tables[as_is] = mount_count()
        # Mounting 128 disks takes seconds, so the two tables alternate by blocks of ten rounds.
        blocks = max(1, launches // 10)
        for block in range(2 * blocks):
            table = as_is if block % 2 == 0 else more
            if table == as_is:
                for _ in range(launches // blocks):
                    one_round(table)
            else:
                with extra_disks(scratch / "disks" / str(block), extra):
                    tables[more] = mount_count()
                    for _ in range(launches // blocks):
                        one_round(table)
                shutil.rmtree(scratch / "disks" / str(block))
    return timings, tables


def table_lines(timings: Timings, tables: dict[str, int], launches: int) -> list[str]:
    medians = {
        name: (1000 * statistics.median(walls), 1000 * statistics.median(cpus))
        for name, (walls, cpus) in timings.items()
    }
    names = {"true": "bwrap + setpriv + `true`", "python": "… + `python3 -I -S -c pass`",
             "python runner": "bwrap + the Python runner, `true` agent (the start before)",
             "native": "bwrap + the native runner, `true` agent (the start now)"}  # fmt: skip
    as_is, more = tables
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {host()} · commit {commit()} "
        f"· {load()} · {launches} launches of each, alternating; mount table {tables[as_is]} "
        f"entries as is, {tables[more]} with the extra disks",
        "",
        f"| inside the sandbox | CPU, table as is | CPU, {more} | wall, table as is "
        f"| wall, {more} | CPU {more} ÷ as is |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, title in names.items():
        (wall_a, cpu_a), (wall_b, cpu_b) = medians[f"{kind}|{as_is}"], medians[f"{kind}|{more}"]
        lines.append(
            f"| {title} | {cpu_a:.1f} ms | {cpu_b:.1f} ms | {wall_a:.1f} ms | {wall_b:.1f} ms "
            f"| {cpu_b / cpu_a:.2f} |"
        )
    lines += ["", "What each layer adds, median CPU per launch (the rows' differences):", ""]
    for table in (as_is, more):
        true_cpu, python_cpu = medians[f"true|{table}"][1], medians[f"python|{table}"][1]
        before, now = medians[f"python runner|{table}"][1], medians[f"native|{table}"][1]
        lines.append(
            f"- table {table}: bubblewrap and setpriv {true_cpu:.1f} ms; the interpreter's start "
            f"{python_cpu - true_cpu:.1f} ms; a start with the Python runner {before:.1f} ms, "
            f"with the native runner {now:.1f} ms (saves {before - now:.1f} ms, "
            f"native ÷ Python {now / before:.2f})"
        )
    added = medians[f"true|{more}"][1] - medians[f"true|{as_is}"][1]
    lines.append(
        f"- the {more} add {added:.1f} ms of CPU to each bubblewrap launch "
        f"({added / (tables[more] - tables[as_is]) * 1000:.0f} µs per mount)"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=60, help="launches of each command")
    parser.add_argument("--extra-mounts", type=int, default=128)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("isolation_cost.py needs root (bubblewrap as root, loop mounts)")
    with sandbox_scratch("isolation-cost-") as scratch:
        timings, tables = measure(args.launches, args.extra_mounts, scratch)
    lines = table_lines(timings, tables, args.launches)
    print("\n".join(lines))
    if args.write:
        write_section("isolation-cost", "\n".join(lines))


if __name__ == "__main__":
    main()
