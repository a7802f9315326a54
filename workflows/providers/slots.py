"""One unprivileged uid per live sandbox, claimed with a file per uid (safe across workers)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from workflows.providers.base import SandboxCreateError


class UidSlots:
    """uids `base` .. `base + count - 1`; `<folder>/<uid>` holds the id of the sandbox using it."""

    def __init__(self, folder: Path, base: int, count: int) -> None:
        self.folder = folder
        self.base = base
        self.count = count

    def claim(self, owner: str) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        start = int.from_bytes(hashlib.sha256(owner.encode()).digest()[:4], "big") % self.count
        for step in range(self.count):
            uid = self.base + (start + step) % self.count
            try:
                fd = os.open(self.folder / str(uid), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(owner)
            return uid
        raise SandboxCreateError(f"all {self.count} sandbox uids are in use")

    def release(self, uid: int, owner: str) -> None:
        path = self.folder / str(uid)
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() == owner:
                path.unlink()
