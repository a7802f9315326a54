"""Where the CPU of one `local` sandbox start goes, and what the host's mount table adds to it.

A `local` cell starts bubblewrap, which starts setpriv, which starts the runner (a Python
interpreter) — each a process of its own (docs/sandbox.md). This script launches, the way the
provider does (the product's `BwrapCommand`: the same namespaces, shared /etc, binds, seccomp
filter and setpriv), three commands inside a sandbox:

- `true`: bubblewrap and setpriv alone;
- `python3 -I -S -c pass`: plus a bare interpreter start;
- the runner with a `true` agent (the compiled runner, `--pid-namespace`, state and logs to
  /out): plus the runner's own work.

Bubblewrap reads the whole mount table (/proc/self/mountinfo) after each of its binds, and
every `local` sandbox in flight adds its disk to that table. So each command is launched twice:
with the host's mount table as it is, and with `--extra-mounts` (default 128, the cells a worker
has in flight) more loop-mounted ext4 disks, made from a template as sandbox disks are. Launches
alternate across the six (command × table) so all see the same load; the script prints the median
wall and CPU time (the children's rusage: bubblewrap, setpriv and what they start) of each, the
differences between the commands (what each layer adds) and the ratio of the larger table to the
smaller. No cgroup is made: that is the worker's work, not the launch's. Needs root.

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
from bench_figures import commit
from results_file import write_section
from stage_table import load, machine

from workflows.providers.common.bwrap import Bind, BwrapCommand, shared_etc, write_etc
from workflows.providers.local.compiled_runner import compiled_runner, in_sandbox_path
from workflows.providers.local.disk import format_image, sparse_copy
from workflows.providers.local.local_provider import SANDBOX_PYTHON, seccomp_memfd
from workflows.providers.local.loop_mount import mount_image, unmount

UID = 65_534  # nobody: the commands only need some unprivileged uid
DISK_MB = 64


def mount_count() -> int:
    with open("/proc/self/mountinfo", "rb") as table:
        return sum(1 for _ in table)


class Sandbox:
    """The folders and command line of one sandbox, reused for every launch (each launch gets a
    fresh /out)."""

    def __init__(self, scratch: Path) -> None:
        self.root = scratch / "sandbox"
        for name in ("repo", "world", "case"):
            (self.root / name).mkdir(parents=True)
        write_etc(self.root / "etc", UID, UID)
        self.runner = compiled_runner(scratch / "runner", SANDBOX_PYTHON)
        self.etc_base = shared_etc(scratch / "etc")
        self.launches = 0

    def command(self, out: Path, seccomp_fd: int | None) -> BwrapCommand:
        binds = [
            Bind(self.root / "repo", "/repo"),
            Bind(self.root / "world", "/world", writable=True),
            Bind(self.root / "case", "/case"),
            Bind(out, "/out", writable=True),
            Bind(self.runner, in_sandbox_path(self.runner)),
        ]
        return BwrapCommand(
            uid=UID, gid=UID, etc_dir=self.root / "etc", etc_base=self.etc_base, binds=binds,
            chdir="/repo", tmp_mb=64, as_pid_1=True, seccomp_fd=seccomp_fd,
        )  # fmt: skip

    def inner(self, kind: str) -> list[str]:
        if kind == "true":
            return ["/usr/bin/true"]
        if kind == "python":
            return [SANDBOX_PYTHON, "-I", "-S", "-c", "pass"]
        return [
            SANDBOX_PYTHON, "-I", "-S", in_sandbox_path(self.runner), "--out", "/out",
            "--cwd", "/repo", "--timeout", "30", "--log-limit", str(1 << 20),
            "--pid-namespace", "--", "true",
        ]  # fmt: skip

    def launch(self, kind: str) -> tuple[float, float]:
        """Wall and CPU seconds of one launch of `kind` ("true", "python" or "runner")."""
        self.launches += 1
        out = self.root / f"out-{self.launches}"
        out.mkdir(mode=0o755)
        os.chown(out, UID, UID)
        filter_fd = seccomp_memfd()
        fds = [filter_fd] if filter_fd is not None else []
        argv = self.command(out, filter_fd).argv(self.inner(kind))
        try:
            cpu, wall = children_cpu(), time.perf_counter()
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, pass_fds=fds)
            wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
        finally:
            for fd in fds:
                os.close(fd)
        if kind == "runner" and b'"finished"' not in (out / ".state.json").read_bytes():
            raise SystemExit("the runner did not finish its agent")
        shutil.rmtree(out)
        return wall, cpu


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
    sandbox = Sandbox(scratch)
    kinds = ("true", "python", "runner")
    timings: Timings = {}
    tables: dict[str, int] = {}

    def one_round(table: str) -> None:
        for kind in kinds:
            wall, cpu = sandbox.launch(kind)
            walls, cpus = timings.setdefault(f"{kind}|{table}", ([], []))
            walls.append(wall)
            cpus.append(cpu)

    (scratch / "disks").mkdir()
    as_is = "as is"
    tables[as_is] = mount_count()
    more = f"+{extra} disks"
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
             "runner": "… + the runner, `true` agent"}  # fmt: skip
    as_is, more = tables
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {machine()} · commit {commit()} "
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
        true_cpu = medians[f"true|{table}"][1]
        python_cpu = medians[f"python|{table}"][1]
        runner_cpu = medians[f"runner|{table}"][1]
        lines.append(
            f"- table {table}: bubblewrap and setpriv {true_cpu:.1f} ms; the interpreter's start "
            f"{python_cpu - true_cpu:.1f} ms; the runner's own work {runner_cpu - python_cpu:.1f}"
            f" ms; in all {runner_cpu:.1f} ms"
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
    with tempfile.TemporaryDirectory(prefix="isolation-cost-") as scratch:
        os.chmod(scratch, 0o755)  # the sandbox uid must reach the runner and the folders
        timings, tables = measure(args.launches, args.extra_mounts, Path(scratch))
    lines = table_lines(timings, tables, args.launches)
    print("\n".join(lines))
    if args.write:
        write_section("isolation-cost", "\n".join(lines))


if __name__ == "__main__":
    main()
