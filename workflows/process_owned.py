"""Things on this host owned by one worker process, and how a restarted worker tells which were
left by a process that is gone (docs/engine.md, "Host queues").

A process is named by its pid and its start time (in clock ticks since boot, from
`/proc/<pid>/stat`), so a pid reused by a later process — a container restarted under the same
pid — is not taken for the owner."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # the fields after the command name, which may hold spaces: state first, start time 20th
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


@functools.cache
def this_process() -> str:
    """This process's name, `<pid>-<start time>`."""
    return f"{os.getpid()}-{start_time(os.getpid())}"


def is_gone(process: str) -> bool:
    """True when no process of that name (see `this_process`) runs on this host."""
    pid, start = process_pid(process), process.partition("-")[2]
    return pid is None or str(start_time(pid)) != start


def process_pid(process: str) -> int | None:
    """The pid in a process name (see `this_process`); None if it holds none."""
    pid = process.partition("-")[0]
    return int(pid) if pid.isdigit() else None


def staging_path(final: Path) -> Path:
    """Where this process makes `final` before renaming it into place: beside it, hidden, named
    by this process so that `reap_partial` knows it for a leftover once the process is gone."""
    return final.parent / f".{final.name}.{secrets.token_hex(6)}.{this_process()}"


def make_in_place(final: Path, make: Callable[[Path], object]) -> None:
    """`make` writes the file it is given (a `staging_path` of `final`), which is then renamed to
    `final`; if `make` or the rename fails, nothing is left and the error is raised."""
    partial = staging_path(final)
    try:
        final.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        make(partial)
        partial.replace(final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def reap_partial(folder: Path) -> list[str]:
    """Remove what processes that are gone left half-made in `folder` (see `staging_path`)."""
    found = folder.glob(".*") if folder.is_dir() else ()
    partial = [p for p in found if is_gone(p.name.rsplit(".", 1)[-1])]
    for leftover in partial:
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    return sorted(p.name for p in partial)
