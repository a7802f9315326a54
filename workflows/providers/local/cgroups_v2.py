"""cgroup v2 (the unified hierarchy) for one sandbox: the `v2` backend of cgroup_backend.py.

Everything happens in a *delegated* subtree: the cgroup this process runs in, read from
`/proc/self/cgroup`, when it is ours to manage — a systemd unit with `Delegate=yes` (systemd marks
it with the `trusted.delegate` or `user.delegate` xattr), or the root of our cgroup namespace (a
container's own cgroup, or the host's root). In `auto` mode any other cgroup (a login session's
scope, say) is left alone, and the provider runs without cgroups; `EVALBOT_SANDBOX_CGROUPS=v2`
uses it anyway. The kernel's "no internal processes" rule forbids a non-root cgroup that has
processes from enabling controllers for its children, so `prepare` first moves the processes of
that cgroup into a leaf of it (`evalbot-supervisor`), then enables the controllers:

    <base>/cgroup.subtree_control            +memory +pids +cpu
    <base>/evalbot-supervisor/cgroup.procs   this process (and whatever else lived in <base>)
    <base>/evalbot/cgroup.subtree_control    +memory +pids +cpu
    <base>/evalbot/cpu.weight                11: all sandboxes weigh one nice-10 process
    <base>/evalbot/<sandbox id>/             one group per sandbox:

    memory.max          limits.memory_mb         the OOM killer acts inside the group only
    memory.swap.max     0                        no swapping past the limit (when swap is accounted)
    pids.max            limits.pids              the fork-bomb defence
    cpu.max             "<quota> 100000"         `limits.cpu` cores
    memory.events       oom_kill N               -> usage().oom_killed
    pids.events         max N                    -> usage().pids_limit_hit
    memory.peak, cpu.stat usage_usec             -> peak memory, CPU seconds
    cgroup.kill         1                        SIGKILL to every member at once, forks included
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
from workflows.providers.local.cgroups import (
    CFS_PERIOD_US,
    SANDBOXES_CPU_SHARES,
    TOP,
    CgroupUsage,
    read_int,
    read_keyed,
)

V2_CONTROLLERS = ("memory", "pids", "cpu")
SUPERVISOR_LEAF = "evalbot-supervisor"  # where the processes of the delegated cgroup move to
SANDBOXES_CPU_WEIGHT = round(SANDBOXES_CPU_SHARES * 100 / 1024)  # v2's scale: nice 0 is 100


def is_unified(root: Path) -> bool:
    """True when `root` is a cgroup2 mount (its root group has `cgroup.controllers`)."""
    return (root / "cgroup.controllers").is_file()


def own_cgroup(proc_file: Path = Path("/proc/self/cgroup")) -> str:
    """This process's cgroup in the unified hierarchy (the `0::<path>` line), e.g. "/" or
    "/system.slice/evalbot.service"; a leaf we moved ourselves into counts as its parent."""
    with contextlib.suppress(OSError):
        for line in proc_file.read_text().splitlines():
            if line.startswith("0::"):
                path = line[3:].strip() or "/"
                if path.rstrip("/").endswith(f"/{SUPERVISOR_LEAF}"):
                    path = path.rstrip("/").rsplit("/", 1)[0] or "/"
                return path
    return "/"


def _tokens(path: Path) -> set[str]:
    """The controller names of a `cgroup.controllers` / `cgroup.subtree_control` file."""
    try:
        return {word.lstrip("+") for word in path.read_text().split()}
    except OSError:
        return set()


def _move_all(source: Path, dest: Path) -> None:
    """Move every process of cgroup `source` into cgroup `dest` (one pid per write)."""
    try:
        pids = source.joinpath("cgroup.procs").read_text().split()
    except OSError:
        return
    fd = os.open(dest / "cgroup.procs", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.write(fd, f"{pid}\n".encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class V2Group:
    path: Path  # <base>/evalbot/<sandbox id>

    def _file(self, name: str) -> str:
        """One of the group's files, as a string: the hot path's form (small_files.py)."""
        return f"{self.path}/{name}"

    def create(self, limits: ResourceLimits, memory_mb: int | None = None) -> None:
        self.path.mkdir(exist_ok=True)
        memory = str((memory_mb or limits.memory_mb) << 20)
        small_files.write_text(self._file("memory.max"), memory)
        swap = self._file("memory.swap.max")
        if os.path.exists(swap):  # absent when the kernel does not account swap
            small_files.write_text(swap, "0")
        small_files.write_text(self._file("pids.max"), str(max(limits.pids, 1)))
        quota = max(int(limits.cpu * CFS_PERIOD_US), 1000)
        small_files.write_text(self._file("cpu.max"), f"{quota} {CFS_PERIOD_US}")

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def procs_files(self) -> list[Path]:
        return [self.path / "cgroup.procs"]

    def add(self, pid: int) -> None:
        small_files.write_text(self._file("cgroup.procs"), str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(word) for word in small_files.read_text(self._file("cgroup.procs")).split()]
        except OSError:
            return []

    def usage(self) -> CgroupUsage:
        return CgroupUsage(
            cpu_seconds=read_keyed(self._file("cpu.stat"), "usage_usec") / 1e6,
            peak_memory_bytes=read_int(self._file("memory.peak")),  # kernel >= 5.19
            oom_kills=read_keyed(self._file("memory.events"), "oom_kill"),
            pids_max_hits=read_keyed(self._file("pids.events"), "max"),
        )

    async def kill_all(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every member through `cgroup.kill` (kernel >= 5.14: atomic, forks included);
        on older kernels freeze, kill, thaw. True once the group is empty."""
        if not self.exists():
            return True
        deadline = time.monotonic() + timeout_s
        kill_file = self._file("cgroup.kill")
        while self.pids():
            if os.path.exists(kill_file):
                with contextlib.suppress(FileNotFoundError):
                    small_files.write_text(kill_file, "1")
            else:
                await self._freeze_and_kill()
            if time.monotonic() >= deadline:
                return not self.pids()
            await asyncio.sleep(0.005)
        return True

    async def _freeze_and_kill(self) -> None:
        freeze = self._file("cgroup.freeze")
        with contextlib.suppress(OSError):
            small_files.write_text(freeze, "1")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            small_files.write_text(freeze, "0")

    async def remove(self, timeout_s: float = 5.0) -> None:
        """rmdir the group (it empties a moment after its last member died)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.01)


@dataclass(frozen=True)
class V2Backend:
    """The unified hierarchy mounted at `root`; sandboxes live under `<root><own>/evalbot/`."""

    root: Path
    own: str = "/"  # this process's cgroup (own_cgroup()), relative to the mount
    require_delegation: bool = True  # False when v2 is forced: the operator vouches for it
    mode: str = "v2"
    weaker: tuple[str, ...] = ()

    @classmethod
    def at(cls, root: Path, own: str | None = None, *, forced: bool = False) -> V2Backend:
        return cls(root, own if own is not None else own_cgroup(), not forced)

    @property
    def base(self) -> Path:
        """The delegated cgroup: the one this process runs in."""
        return self.root / self.own.strip("/")

    def problem(self) -> str | None:
        """None when the base cgroup is writable and offers memory, pids and cpu."""
        if not is_unified(self.root):
            return f"{self.root} is not a cgroup v2 (cgroup2) mount"
        base = self.base
        offered = _tokens(base / "cgroup.controllers")
        missing = [name for name in V2_CONTROLLERS if name not in offered]
        if missing:
            return (
                f"cgroup v2 controllers {', '.join(missing)} are not available in {base} (its "
                "parent does not enable them, or they are bound to cgroup v1; a systemd unit "
                "with Delegate=yes gets them)"
            )
        if not (os.access(base, os.W_OK) and os.access(base / "cgroup.subtree_control", os.W_OK)):
            return f"cgroup v2 group {base} is not writable (not delegated to this process)"
        if self.require_delegation and not self.delegated():
            return (
                f"cgroup v2 group {base} is not delegated to this process (run it in a systemd "
                "unit with Delegate=yes, or set EVALBOT_SANDBOX_CGROUPS=v2 to use it anyway)"
            )
        return None

    def delegated(self) -> bool:
        """Ours to manage: the root of our cgroup namespace, or marked delegated by systemd."""
        if self.own.strip("/") == "":
            return True
        for name in ("trusted.delegate", "user.delegate"):
            with contextlib.suppress(OSError):
                if os.getxattr(self.base, name) == b"1":
                    return True
        return False

    def prepare(self) -> None:
        """Enable the controllers for the sandboxes' groups and give their parent its low CPU
        weight (cgroups.py, SANDBOXES_CPU_SHARES); idempotent: every worker calls it."""
        top = self.base / TOP
        if not set(V2_CONTROLLERS) <= _tokens(top / "cgroup.subtree_control"):
            self._enable_controllers(top)
        small_files.write_text(f"{top}/cpu.weight", str(SANDBOXES_CPU_WEIGHT))

    def _enable_controllers(self, top: Path) -> None:
        enable = " ".join(f"+{name}" for name in V2_CONTROLLERS)
        for attempt in range(5):
            self._leave_base()
            try:
                (self.base / "cgroup.subtree_control").write_text(enable)
                break
            except OSError as error:  # EBUSY: a process was born in the base meanwhile
                if error.errno != errno.EBUSY or attempt == 4:
                    raise
        top.mkdir(exist_ok=True)
        (top / "cgroup.subtree_control").write_text(enable)

    def _leave_base(self) -> None:
        """No internal processes: a non-root cgroup (one with `cgroup.type`) that enables
        controllers for its children may hold no processes itself, so they move to a leaf."""
        base = self.base
        if not (base / "cgroup.type").exists() or not (base / "cgroup.procs").read_text().split():
            return
        leaf = base / SUPERVISOR_LEAF
        leaf.mkdir(exist_ok=True)
        _move_all(base, leaf)

    def group(self, name: str, uid: int | None = None) -> V2Group:
        """`name` is "evalbot/<sandbox id>" (the v1 naming), placed under the base."""
        return V2Group(self.base / name)
