"""benchmarks/disk_cost.py: a short real run times the three ways (a disk of its own by Python's
system calls and by the native library where a C compiler is found, a kept disk) with the larger
mount table and leaves nothing mounted.

Broken builds caught: a kept disk that is not emptied between cells (the next cell's files
already exist and the run stops); extra disks that never reach the mount table (the table line
would count as many entries as before); a disk of a cell, the kept disk or the quota probe's disk
left mounted."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from workflows.providers.common.native_runner import find_compiler
from workflows.providers.local.native_disk import NativeDisk

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
needs_loop_mounts = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/dev/loop-control").exists() or not shutil.which("mkfs.ext4"),
    reason="needs root, loop devices and e2fsprogs",
)


def count_native_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the native library's create and remove ran (the real ones, counted)."""
    calls = {"create": 0, "remove": 0}
    for name in calls:
        real = getattr(NativeDisk, name)

        def counted(self: NativeDisk, *args: Path, name: str = name, real: Any = real) -> None:
            calls[name] += 1
            real(self, *args)

        monkeypatch.setattr(NativeDisk, name, counted)
    return calls


@pytest.fixture
def disk_cost(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import disk_cost

    return disk_cost


@pytest.mark.serial  # counts the host's whole mount table: no other test may mount meanwhile
@needs_loop_mounts
def test_a_short_run_times_every_way_and_leaves_nothing_mounted(
    disk_cost: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_native_calls(monkeypatch)
    before = disk_cost.mount_count()
    text = "\n".join(disk_cost.run(cycles=3, extra_mounts=2))
    ways = [disk_cost.OWN, disk_cost.OWN_NATIVE, disk_cost.KEPT]
    if find_compiler() is None:  # the provider's own rule for building the library
        ways.remove(disk_cost.OWN_NATIVE)
        assert "native disk library is not available here" in text
    else:  # the native row timed the library, not Python's steps: one create, one remove a cycle
        assert calls == {"create": 3, "remove": 3}, calls
    for way in ways:
        row = re.search(rf"^\| {way} \| ([\d.]+) ms \| ([\d.]+) ms \|$", text, re.MULTILINE)
        assert row is not None, text
        assert float(row[1]) > 0 and float(row[2]) > 0
    # the two extra disks and the kept disk were in the table while the cycles ran
    assert f"Mount table while measuring: {before + 3} entries." in text
    assert "ext4 project quotas: " in text
    for way in ways[1:]:  # each other way as a ratio of the first
        assert re.search(rf"^{way} ÷ {disk_cost.OWN}: wall [\d.]+, CPU [\d.]+\.$", text, re.M), text
    assert disk_cost.mount_count() == before


@pytest.mark.serial  # mounts disks: see above
@needs_loop_mounts
def test_without_the_native_library_its_row_is_left_out_and_said_so(
    disk_cost: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(disk_cost, "native_disk", lambda folder: None)  # a host without a compiler
    text = "\n".join(disk_cost.run(cycles=2, extra_mounts=0))
    assert f"| {disk_cost.OWN} |" in text and f"| {disk_cost.KEPT} |" in text
    assert disk_cost.OWN_NATIVE not in text
    assert "The native disk library is not available here" in text
