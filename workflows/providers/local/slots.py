"""One unprivileged uid per live sandbox, claimed with a file per uid (safe across workers)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable
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

    def reap(self, alive: Callable[[str], bool], grace_s: float) -> list[int]:
        """Free the uids whose owner is not alive and was claimed over `grace_s` ago (a worker
        killed between claiming a uid and creating its sandbox leaves such a claim)."""
        freed = []
        now = time.time()
        for path in self.folder.glob("[0-9]*") if self.folder.is_dir() else ():
            with contextlib.suppress(OSError, ValueError):
                if now - path.stat().st_mtime >= grace_s and not alive(path.read_text()):
                    path.unlink()
                    freed.append(int(path.name))
        return freed

    def release(self, uid: int, owner: str) -> None:
        path = self.folder / str(uid)
        with contextlib.suppress(FileNotFoundError):
            if path.read_text() == owner:
                path.unlink()

    def uid_of(self, owner: str) -> int | None:
        """The uid `owner` claimed, if any."""
        for path in self.folder.glob("[0-9]*") if self.folder.is_dir() else ():
            with contextlib.suppress(OSError, ValueError):
                if path.read_text() == owner:
                    return int(path.name)
        return None

    def release_owner(self, owner: str) -> None:
        """Free whatever `owner` claimed (its uid unknown: it was cut off before recording it)."""
        for path in self.folder.glob("[0-9]*") if self.folder.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.read_text() == owner:
                    path.unlink()
