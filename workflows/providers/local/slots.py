"""One unprivileged uid per live sandbox, claimed with a file per uid (safe across workers).

The claims are the host's, not a data folder's (HOST_UID_DIR): two evalbot instances with their
own data folders on one host must not give the same uid to two live sandboxes, since a uid is
what no-cgroup mode kills by and what RLIMIT_NPROC counts (docs/sandbox.md). A claim file holds
the sandbox id, the worker process that claimed it (workflows/process_owned.py) and the folder of
sandboxes it belongs to."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from workflows.process_owned import is_gone, this_process
from workflows.providers.base import SandboxCreateError
from workflows.providers.common import small_files

HOST_UID_DIR = Path("/run/evalbot/uids")  # tmpfs: no sandbox process outlives a reboot
NEW_CLAIM = os.O_WRONLY | os.O_CREAT | os.O_EXCL


@dataclass(frozen=True)
class Claim:
    path: Path
    owner: str  # the sandbox id
    process: str  # the claiming process (workflows/process_owned.py)
    home: Path  # the folder of sandboxes it belongs to

    @property
    def uid(self) -> int:
        return int(self.path.name)


class UidSlots:
    """uids `base` .. `base + count - 1`; `<folder>/<uid>` holds the id of the sandbox using it.
    `home` is the folder of this instance's sandboxes: a claim's sandbox is `home/<id>`."""

    def __init__(self, folder: Path, base: int, count: int, home: Path) -> None:
        self.folder = folder
        self.base = base
        self.count = count
        self.home = home

    def claim(self, owner: str) -> int:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        start = int.from_bytes(hashlib.sha256(owner.encode()).digest()[:4], "big") % self.count
        claim = f"{owner}\n{this_process()}\n{self.home}"
        for step in range(self.count):
            uid = self.base + (start + step) % self.count
            try:
                small_files.write_text(f"{self.folder}/{uid}", claim, NEW_CLAIM, 0o600)
            except FileExistsError:
                continue
            return uid
        raise SandboxCreateError(f"all {self.count} sandbox uids are in use")

    def reap(self, grace_s: float) -> list[int]:
        """Free the uids whose sandbox folder does not exist (a worker killed between claiming a
        uid and creating its sandbox leaves such a claim, here or in another instance on this
        host) and whose claiming process is gone or that were claimed over `grace_s` ago (a
        create in progress has claimed its uid but not yet made its folder)."""
        freed = []
        now = time.time()
        for claim in self.claims():
            with contextlib.suppress(OSError):
                exists = (claim.home / claim.owner).exists()
                settled = now - claim.path.stat().st_mtime >= grace_s
                if not exists and (settled or is_gone(claim.process)):
                    claim.path.unlink()
                    freed.append(claim.uid)
        return freed

    def release(self, uid: int, owner: str) -> None:
        with contextlib.suppress(OSError):
            claim = read_claim(self.folder / str(uid))
            if self.mine(claim, owner):
                claim.path.unlink()

    def uid_of(self, owner: str) -> int | None:
        """The uid `owner` claimed, if any."""
        found = self._claim_of(owner)
        return found.uid if found else None

    def process_of(self, owner: str) -> str | None:
        """The process that claimed a uid for `owner`, None without a claim."""
        found = self._claim_of(owner)
        return found.process if found else None

    def release_owner(self, owner: str) -> None:
        """Free whatever `owner` claimed (its uid unknown: it was cut off before recording it)."""
        found = self._claim_of(owner)
        if found:
            found.path.unlink(missing_ok=True)

    def claims(self) -> list[Claim]:
        """Every complete claim on the host (a claim being written is skipped)."""
        found = []
        for path in self.folder.iterdir() if self.folder.is_dir() else ():
            with contextlib.suppress(OSError, ValueError):
                if path.name.isdigit():
                    found.append(read_claim(path))
        return found

    def mine(self, claim: Claim, owner: str) -> bool:
        return claim.owner == owner and claim.home == self.home

    def _claim_of(self, owner: str) -> Claim | None:
        """`owner`'s claim (one claim per owner)."""
        return next((claim for claim in self.claims() if self.mine(claim, owner)), None)


def read_claim(path: Path) -> Claim:
    """ValueError for a file that does not hold the three lines `claim` writes."""
    owner, process, home = small_files.read_text(path).split("\n")
    if not (owner and process and home):
        raise ValueError(f"incomplete claim {path}")
    return Claim(path, owner, process, Path(home))
