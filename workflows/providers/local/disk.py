"""A size-capped disk per sandbox: a sparse ext4 image, loop-mounted at the sandbox's folder.

/world and /out live on it, so `limits.disk_mb` is a hard cap: a writer gets ENOSPC at the cap and
the host disk never fills. The image is sparse (it grows with what is written, up to the cap) and
costs about 25 ms to make and mount. Its size is the world's size plus `disk_mb` plus a little for
ext4's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

from workflows.providers.base import SandboxCreateError, SandboxError

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MIB = 1 << 20


def _tool(name: str) -> str:
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise SandboxCreateError(f"{name} is not installed (Debian: e2fsprogs / mount)")
    return found


async def _run(argv: list[str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode(errors="replace").strip()


def disk_size_mb(content_bytes: int, disk_mb: int) -> int:
    """Room for the initial content, `disk_mb` more, and ext4 metadata (~3 %, at least 8 MiB)."""
    content_mb = -(-content_bytes * 11 // 10 // MIB)
    total = content_mb + disk_mb
    return total + max(8, total * 3 // 100)


async def create_disk(image: Path, mountpoint: Path, size_mb: int) -> None:
    image.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    os.truncate(image, size_mb * MIB)  # sparse: blocks are allocated as the sandbox writes
    options = "lazy_itable_init=1,lazy_journal_init=1,nodiscard"
    mkfs = [_tool("mkfs.ext4"), "-q", "-F", "-O", "^has_journal", "-m", "0", "-E", options]
    code, detail = await _run([*mkfs, str(image)])
    if code != 0:
        image.unlink(missing_ok=True)
        raise SandboxCreateError(f"could not format the sandbox disk: {detail[-200:]}")
    mountpoint.mkdir(mode=0o755)
    try:
        await mount_disk(image, mountpoint)
    except SandboxError:
        mountpoint.rmdir()
        image.unlink(missing_ok=True)
        raise
    mountpoint.chmod(0o755)


async def mount_disk(image: Path, mountpoint: Path) -> None:
    options = "loop,nosuid,nodev,noatime"
    code, detail = await _run(
        [_tool("mount"), "-t", "ext4", "-o", options, str(image), str(mountpoint)]
    )
    if code != 0:
        raise SandboxCreateError(
            f"could not mount the sandbox disk (loop devices?): {detail[-200:]}"
        )


async def remove_disk(image: Path, mountpoint: Path) -> None:
    """Unmount (lazily if something still holds it) and delete. Safe to repeat."""
    if os.path.ismount(mountpoint):
        code, detail = await _run([_tool("umount"), str(mountpoint)])
        if code != 0:
            code, detail = await _run([_tool("umount"), "--lazy", str(mountpoint)])
        if code != 0:
            raise SandboxError(f"could not unmount the sandbox disk: {detail[-200:]}")
    with contextlib.suppress(FileNotFoundError):
        mountpoint.rmdir()
    image.unlink(missing_ok=True)


def disk_full(mountpoint: Path) -> bool:
    """Whether the sandbox disk is (nearly) full right now: less than 2 MiB or 1 % free (ext4
    refuses writes with about 1 MiB left). The runner applies the same test while the agent runs."""
    try:
        stats = os.statvfs(mountpoint)
    except OSError:
        return False
    floor = max(2 * MIB, stats.f_blocks * stats.f_frsize // 100)
    return stats.f_bavail * stats.f_frsize < floor
