"""Small files read and written with bare system calls: open, read or write, close.

`Path.write_text` and `Path.read_text` build Python's buffered text stack for each call, which
costs an fstat, an isatty ioctl and an lseek besides the open, the read or write and the close,
and a few Python objects: about three times the time of the bare calls. Creating and removing a
`local` sandbox touches a few dozen small files (cgroup knobs, the uid claim, the metadata), on
the worker's busiest path (docs/sandbox.md, "Start-up cost"), so those go through here."""

from __future__ import annotations

import os

PathLike = str | os.PathLike[str]
REPLACE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC  # what Path.write_text opens with


def write_bytes(path: PathLike, data: bytes, flags: int = REPLACE, mode: int = 0o644) -> None:
    """Write all of `data` to `path`, opened with `flags` (O_CLOEXEC added) and, if it is
    created, `mode` (less the umask, as with open())."""
    fd = os.open(path, flags | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_text(path: PathLike, text: str, flags: int = REPLACE, mode: int = 0o644) -> None:
    write_bytes(path, text.encode(), flags, mode)


def read_bytes(path: PathLike) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: PathLike) -> str:
    return read_bytes(path).decode()
