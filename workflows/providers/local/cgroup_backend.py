"""How the `local` provider limits and kills a sandbox's processes: one of three backends, chosen
once per provider by probing the cgroup mount (docs/sandbox.md, "cgroup modes").

    v1    cgroups.py      one hierarchy per controller (pids, memory, cpu, cpuacct, freezer)
    v2    cgroups_v2.py   the unified hierarchy, in the cgroup delegated to this process
    none  no_cgroups.py   no writable controllers: rlimits, processes found by the sandbox's uid

`EVALBOT_SANDBOX_CGROUPS` (auto | v1 | v2 | none) forces one; `auto` takes v2 on a cgroup2 mount
and v1 otherwise, and falls back to `none` (with a one-line notice) when that one is unusable.
The provider talks to a `SandboxGroup` only, whichever backend made it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from workflows.providers.base import ResourceLimits
from workflows.providers.local.cgroups import CONTROLLERS, CgroupUsage, V1Backend
from workflows.providers.local.cgroups_v2 import V2_CONTROLLERS, V2Backend, is_unified
from workflows.providers.local.no_cgroups import NoCgroupBackend

MODES = ("auto", "v1", "v2", "none")


class SandboxGroup(Protocol):
    """A sandbox's processes, as a group: limits, membership, accounting, kill, removal."""

    def create(self, limits: ResourceLimits, memory_mb: int | None = None) -> None: ...

    def exists(self) -> bool: ...

    def procs_files(self) -> list[Path]:
        """Files a process writes its pid to, to join the group (empty: nothing to join)."""
        ...

    def add(self, pid: int) -> None: ...

    def pids(self) -> list[int]: ...

    def usage(self) -> CgroupUsage: ...

    async def kill_all(self, timeout_s: float = 10.0) -> bool: ...

    async def remove(self, timeout_s: float = 5.0) -> None: ...


class CgroupBackend(Protocol):
    @property
    def mode(self) -> str:
        """ "v1", "v2" or "none"."""
        ...

    @property
    def weaker(self) -> tuple[str, ...]:
        """The guarantees this backend gives up against a cgroup one (empty for v1 and v2)."""
        ...

    def problem(self) -> str | None:
        """Why this backend cannot work here (one sentence), or None."""
        ...

    def prepare(self) -> None:
        """Make the host ready for sandbox groups (v2: enable the controllers); idempotent."""
        ...

    def group(self, name: str, uid: int | None = None) -> SandboxGroup: ...


def select_backend(
    mode: str, root: Path, state_dir: Path, *, own: str | None = None
) -> tuple[CgroupBackend, str | None]:
    """The backend for `mode`, and why it cannot work (None if it can). `auto` always works: it
    falls back to `none`, whose `reason` then says why."""
    if mode not in MODES:
        return NoCgroupBackend(state_dir), (
            f"EVALBOT_SANDBOX_CGROUPS={mode!r} is not a cgroup mode; use one of {', '.join(MODES)}"
        )
    if mode == "none":
        return NoCgroupBackend(state_dir), None
    backend: CgroupBackend
    if mode == "v2" or (mode == "auto" and is_unified(root)):
        backend = V2Backend.at(root, own, forced=mode == "v2")
    else:
        backend = V1Backend(root)
    problem = backend.problem()
    if problem is None or mode != "auto":
        return backend, problem
    return NoCgroupBackend(state_dir, reason=problem), None


@dataclass(frozen=True)
class CgroupStatus:
    """What `evalbot doctor` says about cgroups: the host's hierarchy, the controllers we may
    write, the mode the provider will use, and what that mode gives up."""

    hierarchy: str  # "v2", "v1" or "none"
    writable: tuple[str, ...]
    mode: str
    problem: str | None  # a forced mode the host cannot give
    reason: str | None  # why auto fell back to no-cgroup mode
    weaker: tuple[str, ...]


def cgroup_status(
    mode: str, root: Path, state_dir: Path, *, own: str | None = None
) -> CgroupStatus:
    backend, problem = select_backend(mode, root, state_dir, own=own)
    if is_unified(root):
        hierarchy, writable = "v2", _writable_v2(V2Backend.at(root, own))
    elif root.is_dir() and any((root / name).is_dir() for name in CONTROLLERS):
        hierarchy = "v1"
        writable = tuple(name for name in CONTROLLERS if os.access(root / name, os.W_OK))
    else:
        hierarchy, writable = "none", ()
    reason = backend.reason if isinstance(backend, NoCgroupBackend) and mode == "auto" else None
    return CgroupStatus(hierarchy, writable, backend.mode, problem, reason, backend.weaker)


def _writable_v2(backend: V2Backend) -> tuple[str, ...]:
    subtree = backend.base / "cgroup.subtree_control"
    if not os.access(subtree, os.W_OK):
        return ()
    try:
        offered = set((backend.base / "cgroup.controllers").read_text().split())
    except OSError:
        return ()
    return tuple(name for name in V2_CONTROLLERS if name in offered)
