"""No-cgroup mode: the `none` backend of cgroup_backend.py, for hosts without writable cgroup
controllers (unprivileged containers, cgroup v2 without delegation or without the memory, pids
and cpu controllers).

Isolation is unchanged (bubblewrap namespaces, setpriv, seccomp, the sparse disk image); the
limits become rlimits, set by `prlimit` inside the sandbox before the runner starts:

    RLIMIT_AS     limits.memory_mb         per process (address space), not per sandbox
    RLIMIT_NPROC  limits.pids              per uid, and every sandbox has a uid of its own
    RLIMIT_CPU    cpu x wall timeout (s)   per process; no rate limit (SIGXCPU, then SIGKILL)
    RLIMIT_FSIZE  limits.file_size_mb      as in every mode (the runner sets it)

Killing everything finds the sandbox's processes by its uid (fresh per live sandbox) instead of a
cgroup; a marker file under `<sandbox_dir>/.groups/` stands in for the group's existence.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from workflows.providers.base import ResourceLimits
from workflows.providers.local.cgroups import CgroupUsage

MIB = 1 << 20
CPU_GRACE_S = 5  # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL this much later
# What a process that ran out of address space tends to say (Python, glibc/strerror, C++,
# Node); the last part of stderr.log is searched, so memory exhaustion is classified as
# out_of_memory when the agent says so, which is the best this mode can do.
OOM_MARKERS = (
    b"MemoryError",
    b"Cannot allocate memory",
    b"std::bad_alloc",
    b"out of memory",
    b"Out of memory",
)
STDERR_TAIL = 64 << 10

# The guarantees this mode gives up, against a cgroup backend (docs/sandbox.md has the table).
WEAKER = (
    "memory: RLIMIT_AS caps each process's address space, not the sandbox's total (runtimes "
    "that reserve address space, such as the JVM, Go or Node, may fail early); out_of_memory is "
    "recognised from the agent's stderr, not from the kernel",
    "processes: RLIMIT_NPROC per sandbox uid; a refused fork is not reported (pids_limit_hit)",
    "CPU: no rate limit (limits.cpu is not enforced), only RLIMIT_CPU of cpu x wall timeout "
    "seconds per process; CPU seconds and peak memory come from the runner's rusage",
)


def rlimit_prefix(limits: ResourceLimits) -> list[str]:
    """`prlimit` setting the limits of this mode, to run before the runner (inside bwrap)."""
    cpu_s = math.ceil(limits.cpu * limits.wall_timeout_s) + CPU_GRACE_S
    return [
        "/usr/bin/prlimit",
        f"--as={limits.memory_mb * MIB}",
        f"--nproc={max(limits.pids, 1)}",
        f"--cpu={cpu_s}:{cpu_s + CPU_GRACE_S}",
        "--",
    ]


def processes_of(uid: int) -> list[int]:
    """Live processes whose real uid is `uid` (zombies hold nothing and cannot be killed)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            continue
        if f"\nUid:\t{uid}\t".encode() in status and b"\nState:\tZ" not in status:
            found.append(int(entry))
    return found


def looks_out_of_memory(stderr_log: Path) -> bool:
    """The agent's stderr ends with an out-of-memory message. The file is the agent's to
    replace, so it is opened without following links and read only if it is a regular file."""
    try:
        fd = os.open(stderr_log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        os.lseek(fd, max(info.st_size - STDERR_TAIL, 0), os.SEEK_SET)
        tail = os.read(fd, STDERR_TAIL)
    finally:
        os.close(fd)
    return any(marker in tail for marker in OOM_MARKERS)


@dataclass(frozen=True)
class RlimitGroup:
    """Stands in for a sandbox's cgroup: a marker file, and the processes of the sandbox's uid.
    Builds share one uid (`uid=None`): their runner kills its namespace, nothing else is needed."""

    marker: Path
    uid: int | None = None

    def create(self, limits: ResourceLimits, memory_mb: int | None = None) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.touch()

    def exists(self) -> bool:
        return self.marker.exists()

    def procs_files(self) -> list[Path]:
        return []  # nothing to join: the limits come with the command (rlimit_prefix)

    def add(self, pid: int) -> None:
        """Nothing to do: a process belongs to the sandbox by its uid."""

    def pids(self) -> list[int]:
        return processes_of(self.uid) if self.uid is not None else []

    def usage(self) -> CgroupUsage:
        return CgroupUsage(0.0, 0, 0, 0)  # the provider reads the runner's rusage instead

    async def kill_all(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL the sandbox's processes until none is left. The runner is among them: it is
        pid 1 of the sandbox's pid namespace, whose death takes the whole namespace with it."""
        deadline = time.monotonic() + timeout_s
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() >= deadline:
                return not self.pids()
            await asyncio.sleep(0.005)
        return True

    async def remove(self, timeout_s: float = 5.0) -> None:
        """Like a cgroup's rmdir, wait (a while) for the last processes to be gone first: the
        runner writes its final state a moment before it exits, still holding the disk."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.pids():
                break
            await asyncio.sleep(0.01)
        self.marker.unlink(missing_ok=True)


@dataclass(frozen=True)
class NoCgroupBackend:
    state_dir: Path  # <sandbox_dir>/.groups
    reason: str = "forced by EVALBOT_SANDBOX_CGROUPS=none"
    mode: str = "none"
    weaker: tuple[str, ...] = WEAKER

    def problem(self) -> str | None:
        return None

    def prepare(self) -> None:
        """Nothing to set up."""

    def group(self, name: str, uid: int | None = None) -> RlimitGroup:
        return RlimitGroup(self.state_dir / name, uid)

    def notice(self) -> str:
        return (
            f"no-cgroup mode ({self.reason}): local sandboxes are isolated as ever but limited "
            "by rlimits, with weaker memory, CPU and process limits (docs/sandbox.md; "
            "`evalbot doctor` has the details)"
        )
