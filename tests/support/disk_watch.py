"""Which paths the process touches, seen through Python's audit hooks (PEP 578).

`touched()` records every path opened, listed or scanned by any thread of this process while the
block runs (`open`, `os.listdir`, `os.scandir`, `os.mkdir`, `os.remove`, ...): a test can then
prove that nothing outside a folder was read. Audit hooks cannot be removed, so one hook is
installed on first use and records only while a `touched()` block is active.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EVENTS = frozenset(
    {"open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rename", "os.chdir",
     "os.symlink", "os.truncate", "shutil.rmtree", "shutil.copytree"}
)  # fmt: skip
_recorders: list[list[str]] = []
_lock = threading.Lock()
_installed = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _recorders or event not in EVENTS or not args:
        return
    path = args[0]
    if isinstance(path, str | bytes | os.PathLike):
        with _lock:
            for recorder in _recorders:
                recorder.append(os.fsdecode(path))


@contextmanager
def touched() -> Iterator[list[str]]:
    """The paths touched (as given to the call) while the block runs."""
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        recorder: list[str] = []
        _recorders.append(recorder)
    try:
        yield recorder
    finally:
        with _lock:
            _recorders.remove(recorder)


def inside(path: str, folder: Path) -> bool:
    """`path` (absolute, or relative to the working directory) lies in `folder`."""
    try:
        return Path(os.path.abspath(path)).is_relative_to(folder.resolve())
    except ValueError:  # e.g. an embedded NUL
        return False
