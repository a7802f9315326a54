"""Sandbox paths (`/out/answer.md`) to host files, never following a symlink.

A sandbox path must start with one of the four roots (/repo, /world, /case, /out) and may not
contain `..`. Every component below the root is opened relative to its parent's file descriptor with
O_NOFOLLOW, so a symlink the agent planted (even one swapped in while we walk) is an error, never a
way out of the sandbox. Reads refuse anything but regular files (a FIFO would block us forever).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path

from workflows.providers.base import FileInfo, FileKind, SandboxFileError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
REASONS = {
    errno.ENOENT: "does not exist",
    errno.ELOOP: "goes through a symlink",
    errno.ENOTDIR: "goes through something that is not a folder",
    errno.EISDIR: "is a folder",
    errno.EACCES: "is not accessible",
    errno.EPERM: "is not accessible",
    errno.ENOSPC: "cannot be written: the sandbox disk is full",
    errno.EFBIG: "cannot be written: file too large",
    errno.ENXIO: "is not a regular file",
    errno.EROFS: "is on a read-only file system",
}

Owner = tuple[int, int] | None


class HostPath:
    """One sandbox path resolved to (host root folder, components below it)."""

    def __init__(self, path: str, roots: Mapping[str, Path]) -> None:
        if not path.startswith("/") or "\x00" in path:
            raise SandboxFileError(f"{path!r} is not an absolute sandbox path")
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise SandboxFileError(f"{path!r} must not contain '..'")
        if not parts or parts[0] not in roots:
            allowed = ", ".join(f"/{name}" for name in roots)
            raise SandboxFileError(f"{path!r} is outside the sandbox roots ({allowed})")
        self.path = path
        self.root = roots[parts[0]]
        self.parts = tuple(parts[1:])

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except OSError as error:
            reason = REASONS.get(error.errno or 0, error.strerror or "cannot be accessed")
            raise SandboxFileError(f"{self.path} {reason}") from None

    def open_dir(self, parts: tuple[str, ...], create: bool = False, owner: Owner = None) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts:
                if create:
                    make_dir(fd, part, owner)
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_file(self, flags: int, owner: Owner = None) -> int:
        """Open the final component; refuse anything but a regular file."""
        if not self.parts:
            raise SandboxFileError(f"{self.path} is a folder")
        with self.errors():
            parent = self.open_dir(self.parts[:-1], create=bool(flags & os.O_CREAT), owner=owner)
            try:
                fd = os.open(self.parts[-1], flags, 0o644, dir_fd=parent)
            finally:
                os.close(parent)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise SandboxFileError(f"{self.path} is not a regular file")
            os.set_blocking(fd, True)
            return fd


def make_dir(parent: int, name: str, owner: Owner) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        return
    if owner is not None:
        os.chown(name, *owner, dir_fd=parent, follow_symlinks=False)


def read_bytes(target: HostPath, max_bytes: int) -> bytes:
    fd = target.open_file(READ_FLAGS)
    with target.errors(), os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > max_bytes:
            raise SandboxFileError(f"{target.path} is larger than {max_bytes} bytes")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SandboxFileError(f"{target.path} is larger than {max_bytes} bytes")
    return data


def write_bytes(target: HostPath, data: bytes, owner: Owner) -> None:
    fd = target.open_file(WRITE_FLAGS, owner=owner)
    with target.errors(), os.fdopen(fd, "wb") as handle:
        if owner is not None:
            os.fchown(fd, *owner)
        handle.write(data)


def iter_chunks(target: HostPath, chunk_size: int) -> Generator[bytes, None, None]:
    fd = target.open_file(READ_FLAGS)
    with target.errors(), os.fdopen(fd, "rb", buffering=0) as handle:
        while chunk := handle.read(chunk_size):
            yield chunk


def list_tree(target: HostPath) -> list[FileInfo]:
    """Everything below the folder, depth first, without following symlinks."""
    with target.errors():
        top = target.open_dir(target.parts)
    found: list[FileInfo] = []
    stack: list[tuple[int, str]] = [(top, "")]
    with target.errors():
        while stack:
            fd, prefix = stack.pop()
            try:
                stack.extend(scan(fd, prefix, found))
            finally:
                os.close(fd)
    return found


def scan(fd: int, prefix: str, found: list[FileInfo]) -> list[tuple[int, str]]:
    subdirs: list[tuple[int, str]] = []
    with os.scandir(fd) as entries:
        for entry in sorted(entries, key=lambda item: item.name):
            info = entry.stat(follow_symlinks=False)
            kind = file_kind(info.st_mode)
            found.append(
                FileInfo(prefix + entry.name, kind, 0 if kind is FileKind.DIR else info.st_size)
            )
            if kind is FileKind.DIR:
                with contextlib.suppress(OSError):  # swapped for a symlink meanwhile: skip it
                    subdirs.append(
                        (os.open(entry.name, DIR_FLAGS, dir_fd=fd), f"{prefix}{entry.name}/")
                    )
    return subdirs


def file_kind(mode: int) -> FileKind:
    if stat.S_ISLNK(mode):
        return FileKind.SYMLINK
    if stat.S_ISDIR(mode):
        return FileKind.DIR
    if stat.S_ISREG(mode):
        return FileKind.FILE
    return FileKind.OTHER
