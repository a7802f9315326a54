"""Which file system holds a folder, and whether ext4 there keeps a journal.

Each cell of an experiment creates and removes a few dozen small files (its sandbox folder, the
runner's state, the collect's staging). ext4 without a journal skips inodes deleted in the last
minute or two when it allocates one, so under that churn every new file scans past thousands of
them (docs/sandbox.md, "The file system under the sandboxes"). `evalbot doctor` warns about it;
benchmarks/peers.py names the file system of its rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MOUNTS = "/proc/mounts"
JOURNALS = "/proc/fs/jbd2"  # jbd2 lists each journaled device as `<device>-<journal inode>`


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
            inside = path == point or path.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind, device = point, fstype, os.path.basename(source)
    if kind != "ext4":
        return FileSystem(kind, best, None)
    listed = os.listdir(journals) if os.path.isdir(journals) else []
    return FileSystem(kind, best, any(name.startswith(f"{device}-") for name in listed))
