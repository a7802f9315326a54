"""One unprivileged uid per live sandbox, claimed with a file per uid (safe across workers).

A claim file holds the sandbox id, then the worker process that claimed
it (workflows/process_owned.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from workflows.process_owned import is_gone, this_process
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
                handle.write(f"{owner}\n{this_process()}")
            return uid
        raise SandboxCreateError(f"all {self.count} sandbox uids are in use")

    def reap(self, alive: Callable[[str], bool], grace_s: float) -> list[int]:
        """Free the uids whose owner is not alive (a worker killed between claiming a uid and
        creating its sandbox leaves such a claim) and whose claiming process is gone or that were
        claimed over `grace_s` ago (a create in progress elsewhere has claimed its uid but not
        yet made its folder)."""
        freed = []
        now = time.time()
        for path in self.folder.glob("[0-9]*") if self.folder.is_dir() else ():
            with contextlib.suppress(OSError, ValueError):
                owner, process = _claim(path)
                settled = now - path.stat().st_mtime >= grace_s
                if not alive(owner) and (settled or (process and is_gone(process))):
                    path.unlink()
                    freed.append(int(path.name))
        return freed

    def release(self, uid: int, owner: str) -> None:
        path = self.folder / str(uid)
        with contextlib.suppress(FileNotFoundError):
            if _claim(path)[0] == owner:
                path.unlink()

    def uid_of(self, owner: str) -> int | None:
        """The uid `owner` claimed, if any."""
        found = self._claim_of(owner)
        return int(found[0].name) if found else None

    def process_of(self, owner: str) -> str | None:
        """The process that claimed a uid for `owner` ("" if not recorded), None without a claim."""
        found = self._claim_of(owner)
        return found[1] if found else None

    def release_owner(self, owner: str) -> None:
        """Free whatever `owner` claimed (its uid unknown: it was cut off before recording it)."""
        found = self._claim_of(owner)
        if found:
            found[0].unlink(missing_ok=True)

    def _claim_of(self, owner: str) -> tuple[Path, str] | None:
        """`owner`'s claim file and the process that made it (one claim per owner)."""
        for path in self.folder.glob("[0-9]*") if self.folder.is_dir() else ():
            with contextlib.suppress(OSError):
                claimed_by, process = _claim(path)
                if claimed_by == owner:
                    return path, process
        return None


def _claim(path: Path) -> tuple[str, str]:
    """The owner of a claim file and the process that claimed it ("" in files written before
    the process was recorded)."""
    owner, _, process = path.read_text().partition("\n")
    return owner, process
