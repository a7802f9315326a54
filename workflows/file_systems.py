"""Which file system holds a folder, whether ext4 there keeps a journal, and how to keep
unrelated folders apart on it.

Each cell of an experiment creates and removes a few dozen small files (its sandbox folder, the
runner's state, the collect's staging). ext4 without a journal skips inodes deleted in the last
minute or two when it allocates one, so under that churn every new file scans past thousands of
them (docs/sandbox.md, "The file system under the sandboxes"). The providers and the blob staging
spread their subfolders over block groups (`spread_subfolders`), which keeps those scans short;
`evalbot doctor` still names such a file system; benchmarks/peers.py names the file system of its
rows.
"""

from __future__ import annotations

import array
import fcntl
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MOUNTS = "/proc/mounts"
JOURNALS = "/proc/fs/jbd2"  # jbd2 lists each journaled device as `<device>-<journal inode>`
FS_IOC_GETFLAGS = 0x80086601  # linux/fs.h: _IOR('f', 1, long); the kernel reads an int
FS_IOC_SETFLAGS = 0x40086602
FS_TOPDIR_FL = 0x00020000  # `chattr +T`: "top of directory hierarchies"


@dataclass(frozen=True)
class FileSystem:
    kind: str  # "ext4", "tmpfs", ...; "unknown" when no mount holds the path
    mount_point: str
    journal: bool | None  # ext4 only; None for every other kind

    def describe(self) -> str:
        if self.journal is None:
            return self.kind
        return f"{self.kind}, {'journal' if self.journal else 'no journal'}"

    @property
    def slow_to_churn(self) -> bool:
        """ext4 without a journal: creating files where many were just deleted is slow."""
        return self.journal is False


def file_system_of(path: str, mounts: str = MOUNTS, journals: str = JOURNALS) -> FileSystem:
    """The file system of the longest mount point holding `path` (an absolute path)."""
    best, kind, device = "", "unknown", ""
    with open(mounts) as table:
        for line in table:
            source, point, fstype, *_ = line.split()
            if within(path, point) and len(point) >= len(best):
                best, kind, device = point, fstype, os.path.basename(source)
    if kind != "ext4":
        return FileSystem(kind, best, None)
    listed = os.listdir(journals) if os.path.isdir(journals) else []
    return FileSystem(kind, best, any(name.startswith(f"{device}-") for name in listed))


def within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies below it (absolute paths, no trailing slash)."""
    return folder == "/" or path == folder or path.startswith(f"{folder}/")


def spread_subfolders(folder: Path) -> bool:
    """Ask ext4 to place each new subfolder of `folder` in a block group of its own (the Orlov
    allocator's rule for top-level folders: `chattr +T`). Sandboxes and staged outputs are such
    subfolders. Without it they share their parent's block group, and on a file system without
    a journal each inode made there scans past every one the other sandboxes removed in the last
    minutes. True where set; False where the file system has no such attribute (tmpfs, XFS, ...)
    or we may not set it, which changes nothing else. Not inherited: below each subfolder, files
    stay together."""
    return _with_flags(folder, lambda flags: flags | FS_TOPDIR_FL) is not None


def can_spread_subfolders(folder: Path) -> bool:
    """Whether `spread_subfolders` works in `folder`: tried on a subfolder made for it, then
    removed."""
    try:
        probe = Path(tempfile.mkdtemp(prefix=".evalbot-spread-", dir=folder))
    except OSError:
        return False
    try:
        return spread_subfolders(probe)
    finally:
        probe.rmdir()


def spreads_subfolders(folder: Path) -> bool:
    """Whether `folder` carries the attribute `spread_subfolders` sets."""
    flags = _with_flags(folder, lambda flags: flags)
    return flags is not None and bool(flags & FS_TOPDIR_FL)


def _with_flags(folder: Path, change: Callable[[int], int]) -> int | None:
    """The folder's inode flags after `change` (written only when it changes them); None where
    they cannot be read or written."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(descriptor, FS_IOC_GETFLAGS, flags, True)
        wanted = change(flags[0])
        if wanted != flags[0]:
            flags[0] = wanted
            fcntl.ioctl(descriptor, FS_IOC_SETFLAGS, flags, True)
        return flags[0]
    except OSError:
        return None
    finally:
        os.close(descriptor)
