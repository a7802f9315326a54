"""What a `local` sandbox's own disk costs per cell, and whether a disk kept and emptied between
cells would save it (docs/sandbox.md, "Start-up cost").

Each cell of the `local` provider gets a disk of its own: a sparse copy of a formatted template,
bound to a loop device and mounted (create), then unmounted and deleted (teardown). This script
times that cycle with the product's functions (DiskTemplates.copy and create_disk, remove_disk),
both ways the provider makes it — by Python's system calls, and by one call each into the native
library (disk_ops.c, built here by the system compiler, as `evalbot doctor` reports; without it its
row is left out and a line says so) — against what a provider that kept one mounted disk per slot
would do instead: remove every entry the last cell left. Every way then makes the same few files (a
world with one document, /out), so each pays for them. Cycles alternate so every way sees the same
load; the script prints the median wall and CPU time of each (this process, where the mount and
unmount system calls run, and its children), with `--extra-mounts` (default 128, a worker's cells
in flight) more disks in the mount table, as a worker has while it works.

It also says whether this kernel gives ext4 project quotas (`mount -o prjquota` of a disk
formatted with `-O quota,project`): the way to cap a sandbox folder's size without a disk of its
own. Needs root.

    .venv/bin/python benchmarks/disk_cost.py [--cycles 200] [--extra-mounts 128] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alternated import Timings, cpu_seconds, median_table
from isolation_cost import extra_disks, mount_count
from results_file import write_section

from workflows.providers.local.disk import DiskTemplates, create_disk, remove_disk
from workflows.providers.local.native_disk import NativeDisk, native_disk

DISK_MB = 64
OWN = "a disk of its own"  # template copy, loop device, mount; unmount, delete
OWN_NATIVE = "a disk of its own, native"  # the same, one call each into disk_ops.c
KEPT = "one kept disk, emptied"  # every entry the cell left removed
Cycle = Callable[[int], Awaitable[None]]


def fill(root: Path) -> None:
    """The few files every cell's disk holds, whichever way it was made."""
    (root / "world").mkdir()
    (root / "world" / "doc.md").write_text("the document\n")
    (root / "out").mkdir()
    (root / "out" / "answer.md").write_text("the answer is 42\n")


def empty(root: Path) -> None:
    for entry in os.scandir(root):
        if entry.name != "lost+found":
            shutil.rmtree(entry.path)


class Ways:
    def __init__(self, scratch: Path, native: NativeDisk | None) -> None:
        self.scratch = scratch
        self.templates = DiskTemplates(scratch / "templates")
        self.kept = scratch / "kept"
        self.native = native

    async def own_disk(self, index: int, native: NativeDisk | None = None) -> None:
        image, mountpoint = self.scratch / f"{index}.ext4", self.scratch / f"own-{index}"
        await create_disk(image, mountpoint, DISK_MB, templates=self.templates, native=native)
        fill(mountpoint)
        await remove_disk(image, mountpoint, native=native)

    async def own_native_disk(self, index: int) -> None:
        await self.own_disk(index, self.native)

    async def kept_disk(self, index: int) -> None:
        fill(self.kept)
        empty(self.kept)

    async def __aenter__(self) -> Ways:
        await create_disk(self.scratch / "kept.ext4", self.kept, DISK_MB, templates=self.templates)
        return self

    async def __aexit__(self, *_: object) -> None:
        await remove_disk(self.scratch / "kept.ext4", self.kept)


async def measure(cycles: int, scratch: Path, native: NativeDisk | None) -> tuple[Timings, int]:
    """The timings, and how many mounts the table held while the cycles ran (a cell's own disk
    aside)."""
    timings: Timings = {}
    async with Ways(scratch, native) as ways:
        table = mount_count()
        sides: dict[str, Cycle] = {OWN: ways.own_disk}
        if native is not None:
            sides[OWN_NATIVE] = ways.own_native_disk
        sides[KEPT] = ways.kept_disk
        await ways.own_disk(-1)  # the template is formatted once, outside the figures
        for index in range(cycles):
            for name, cycle in sides.items():
                cpu, wall = cpu_seconds(), time.perf_counter()
                await cycle(index)
                wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
                walls, cpus = timings.setdefault(name, ([], []))
                walls.append(wall)
                cpus.append(cpu)
    return timings, table


def project_quotas(scratch: Path) -> str:
    """Whether the kernel mounts an ext4 with project quotas enforced, in one sentence."""
    image, mountpoint = scratch / "quota.ext4", scratch / "quota"
    mkfs = ["mkfs.ext4", "-q", "-F", "-O", "quota,project", "-E", "quotatype=prjquota"]
    subprocess.run([*mkfs, str(image), f"{DISK_MB}M"], check=True, capture_output=True)
    mountpoint.mkdir()
    mount = subprocess.run(
        ["mount", "-o", "loop,prjquota", str(image), str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mount.returncode == 0:
        subprocess.run(["umount", str(mountpoint)], check=True)
        return "ext4 project quotas: available on this kernel (`mount -o prjquota` succeeded)."
    return (
        "ext4 project quotas: not available on this kernel (`mount -o prjquota` of a disk "
        f"formatted with `-O quota,project` exits {mount.returncode}; kernel log: "
        f"{kernel_says_why()})."
    )


def kernel_says_why() -> str:
    """The kernel log's last line about quotas, or why there is none to quote."""
    log = subprocess.run(["dmesg"], capture_output=True, text=True, check=False)
    lines = [line for line in log.stdout.splitlines() if "quota" in line.lower()]
    if log.returncode != 0 or not lines:
        return "not readable here" if log.returncode != 0 else "nothing about quotas"
    return "`" + lines[-1].partition("] ")[2].strip() + "`"


def run(cycles: int, extra_mounts: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="disk-cost-") as folder:
        scratch = Path(folder)
        (scratch / "extra").mkdir()
        native = native_disk(scratch / "native")
        with extra_disks(scratch / "extra", extra_mounts):
            timings, table = asyncio.run(measure(cycles, scratch, native))
        quotas = project_quotas(scratch)
    lines = median_table("per cell", "cycle", timings, cycles, decimals=2)
    if native is None:
        lines += ["", "The native disk library is not available here (see the log): no row."]
    return [*lines, "", f"Mount table while measuring: {table} entries.", "", quotas]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200, help="cycles of each way")
    parser.add_argument("--extra-mounts", type=int, default=128)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("disk_cost.py needs root (loop mounts)")
    lines = run(args.cycles, args.extra_mounts)
    print("\n".join(lines))
    if args.write:
        write_section("disk-cost", "\n".join(lines))


if __name__ == "__main__":
    main()
