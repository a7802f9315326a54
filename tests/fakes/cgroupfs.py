"""A fake cgroup v2 mount: a folder laid out like /sys/fs/cgroup on a unified host.

The kernel's interface files are plain files here, so a test sees exactly what the code wrote
where. What the kernel would do by itself (create a new group's files on mkdir, empty a group on
`cgroup.kill`) is done by the helpers below, when the test says so.
"""

from __future__ import annotations

import os
from pathlib import Path

ALL_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"

# The files of a fresh group, as the kernel shows them (values abridged to what we read).
GROUP_FILES = {
    "cgroup.procs": "",
    "cgroup.type": "domain\n",
    "cgroup.controllers": "cpu memory pids\n",
    "cgroup.subtree_control": "",
    "cgroup.kill": "",
    "cgroup.freeze": "0\n",
    "memory.max": "max\n",
    "memory.swap.max": "max\n",
    "memory.peak": "0\n",
    "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
    "pids.max": "max\n",
    "pids.events": "max 0\n",
    "cpu.max": "max 100000\n",
    "cpu.weight": "100\n",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
}


def make_unified_mount(
    root: Path,
    own: str = "/system.slice/evalbot.service",
    *,
    controllers: str = "cpu memory pids",
    procs: tuple[int, ...] = (4242, 4343),
    delegated: bool = True,
) -> Path:
    """A cgroup2 mount at `root` whose group `own` (this process's) offers `controllers` and
    holds `procs`; `delegated` marks it as systemd marks a `Delegate=yes` unit's group (the
    `trusted.delegate` xattr). Returns the group's folder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(ALL_CONTROLLERS + "\n")
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (root / "cgroup.procs").write_text("1\n")
    base = root / own.strip("/")
    if base == root:
        (root / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in (1, *procs)))
        return root
    base.mkdir(parents=True, exist_ok=True)
    kernel_mkdir(base)
    (base / "cgroup.controllers").write_text(controllers + "\n")
    (base / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in procs))
    if delegated:
        os.setxattr(base, "trusted.delegate", b"1")
    return base


def kernel_mkdir(group: Path, *, swap: bool = True) -> Path:
    """What the kernel does on mkdir in a cgroup2 mount: the new group's interface files."""
    group.mkdir(parents=True, exist_ok=True)
    for name, content in GROUP_FILES.items():
        if name == "memory.swap.max" and not swap:
            continue
        (group / name).write_text(content)
    return group


def kernel_rmdir(group: Path) -> None:
    """Forget the interface files, so the code's rmdir finds the folder empty (as the kernel's
    virtual files never stop an rmdir)."""
    for path in group.iterdir():
        if path.is_file():
            path.unlink()
