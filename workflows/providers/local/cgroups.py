"""cgroup v1 for one sandbox: limits, accounting, and killing everything inside (the `v1` backend
of cgroup_backend.py; cgroups_v2.py is the unified hierarchy, no_cgroups.py the rlimit fallback).

One group named `evalbot/<sandbox id>` in each controller, and `evalbot/cpu.shares` at 110 for all
of them together (one nice-10 process's weight; SANDBOXES_CPU_SHARES):

    pids     pids.max                       the fork-bomb defence (RLIMIT_NPROC is not enforced
                                            for root, and every sandbox uid is fresh anyway)
    memory   memory.limit_in_bytes (+memsw)  the OOM killer acts inside the group only
    cpu      cpu.cfs_quota_us / period       `limits.cpu` cores
    cpuacct  cpuacct.usage                   CPU seconds used
    freezer  freezer.state                   freeze, kill, thaw: nothing forks while we kill
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from workflows.providers.base import ResourceLimits
from workflows.providers.common import small_files

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory", "cpu", "cpuacct", "freezer")
CFS_PERIOD_US = 100_000
TOP = "evalbot"  # the parent of the sandbox groups
# The sandboxes' parent group weighs what one process at nice 10 does (nice 0 is 1024), so the
# worker and the Temporal server run first when the cores are contended (docs/sandbox.md).
SANDBOXES_CPU_SHARES = 110


def group_name(sandbox_id: str) -> str:
    """A sandbox's group, under the sandboxes' parent, in every hierarchy (v1 and v2)."""
    return f"{TOP}/{sandbox_id}"


@dataclass(frozen=True)
class CgroupUsage:
    cpu_seconds: float
    peak_memory_bytes: int
    oom_kills: int
    pids_max_hits: int


def cgroups_available(root: Path = CGROUP_ROOT) -> str | None:
    """None when every v1 controller we need is mounted and writable; else what is missing."""
    missing = [name for name in CONTROLLERS if not os.access(root / name, os.W_OK)]
    if missing:
        return f"cgroup v1 controllers not writable under {root}: {', '.join(missing)}"
    return None


def read_int(path: str, default: int = 0) -> int:
    try:
        return int(small_files.read_text(path).split()[0])
    except (OSError, ValueError, IndexError):
        return default


def read_keyed(path: str, key: str) -> int:
    with contextlib.suppress(OSError):
        for line in small_files.read_text(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    return 0


@dataclass(frozen=True)
class CgroupSet:
    name: str  # group_name(sandbox id): "evalbot/<sandbox id>"
    root: Path = CGROUP_ROOT

    def path(self, controller: str) -> Path:
        return Path(self._dir(controller))

    def _dir(self, controller: str) -> str:
        """The group's folder in one controller, as a string: the hot path's form."""
        return f"{self.root}/{controller}/{self.name}"

    def procs_files(self) -> list[Path]:
        return [self.path(controller) / "cgroup.procs" for controller in CONTROLLERS]

    def add(self, pid: int) -> None:
        for controller in CONTROLLERS:
            small_files.write_text(f"{self._dir(controller)}/cgroup.procs", str(pid))

    def create(self, limits: ResourceLimits, memory_mb: int | None = None) -> None:
        for controller in CONTROLLERS:
            os.makedirs(self._dir(controller), exist_ok=True)
        small_files.write_text(f"{self._dir('pids')}/pids.max", str(max(limits.pids, 1)))
        memory = str((memory_mb or limits.memory_mb) << 20)
        small_files.write_text(f"{self._dir('memory')}/memory.limit_in_bytes", memory)
        memsw = f"{self._dir('memory')}/memory.memsw.limit_in_bytes"
        if os.path.exists(memsw):  # no swapping past the limit either
            small_files.write_text(memsw, memory)
        cpu = self._dir("cpu")
        small_files.write_text(f"{cpu}/cpu.cfs_period_us", str(CFS_PERIOD_US))
        quota = max(int(limits.cpu * CFS_PERIOD_US), 1000)
        small_files.write_text(f"{cpu}/cpu.cfs_quota_us", str(quota))

    def exists(self) -> bool:
        return os.path.isdir(self._dir("pids"))

    def pids(self) -> list[int]:
        try:
            text = small_files.read_text(f"{self._dir('pids')}/cgroup.procs")
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def usage(self) -> CgroupUsage:
        memory = self._dir("memory")
        return CgroupUsage(
            cpu_seconds=read_int(f"{self._dir('cpuacct')}/cpuacct.usage") / 1e9,
            peak_memory_bytes=read_int(f"{memory}/memory.max_usage_in_bytes"),
            oom_kills=read_keyed(f"{memory}/memory.oom_control", "oom_kill"),
            pids_max_hits=read_keyed(f"{self._dir('pids')}/pids.events", "max"),
        )

    async def kill_all(self, timeout_s: float = 10.0) -> bool:
        """Freeze, SIGKILL every member, thaw; repeat until empty. True if it emptied in time."""
        deadline = time.monotonic() + timeout_s
        while pids := self.pids():
            frozen = await self._set_frozen(True, deadline)
            for pid in pids + (self.pids() if frozen else []):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await self._set_frozen(False, deadline)
            if time.monotonic() >= deadline:
                return not self.pids()
            await asyncio.sleep(0.005)
        return True

    async def _set_frozen(self, frozen: bool, deadline: float) -> bool:
        state = f"{self._dir('freezer')}/freezer.state"
        wanted = "FROZEN" if frozen else "THAWED"
        give_up = min(deadline, time.monotonic() + 1.0)  # a task stuck in D state never freezes
        try:
            small_files.write_text(state, wanted)
            while small_files.read_text(state).strip() != wanted:
                if time.monotonic() >= give_up:
                    return False
                await asyncio.sleep(0.002)
        except OSError:
            return False
        return True

    async def remove(self, timeout_s: float = 5.0) -> None:
        """rmdir every group (a group empties a moment after its last member died)."""
        deadline = time.monotonic() + timeout_s
        for controller in CONTROLLERS:
            path = self._dir(controller)
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                        raise
                    await asyncio.sleep(0.01)


@dataclass(frozen=True)
class V1Backend:
    """cgroup v1: one hierarchy per controller, mounted under `root` (writable as root)."""

    root: Path = CGROUP_ROOT
    mode: str = "v1"
    weaker: tuple[str, ...] = ()

    def problem(self) -> str | None:
        return cgroups_available(self.root)

    def prepare(self) -> None:
        """The sandboxes' parent group in the cpu hierarchy, with its low weight (idempotent;
        every worker calls it). The other hierarchies need nothing: they are ours as root."""
        top = self.root / "cpu" / TOP
        top.mkdir(exist_ok=True)
        small_files.write_text(f"{top}/cpu.shares", str(SANDBOXES_CPU_SHARES))

    def group(self, name: str, uid: int | None = None) -> CgroupSet:
        return CgroupSet(name, self.root)
