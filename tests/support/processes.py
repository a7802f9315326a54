"""The machine's processes, read from /proc: what a command started, and what it left behind."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Proc:
    pid: int
    start: str  # /proc/<pid>/stat field 22: tells a reused pid apart
    ppid: int
    cmdline: str


def processes() -> dict[int, Proc]:
    """Every live process (zombies excluded: they hold nothing)."""
    found: dict[int, Proc] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        found[int(entry.name)] = Proc(int(entry.name), fields[19], int(fields[1]), cmdline)
    return found


def descendants(root: int, table: dict[int, Proc]) -> set[Proc]:
    children: dict[int, list[Proc]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    found: set[Proc] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child.pid)
    return found


def left_behind(started: set[Proc], data_dir: Path) -> set[Proc]:
    """What the command started that still runs, and anything running on its data dir."""
    now = processes()
    alive = {p for p in started if p.pid in now and now[p.pid].start == p.start}
    on_data_dir = {p for p in now.values() if str(data_dir) in p.cmdline}
    return alive | on_data_dir


def kill_leftovers(command: subprocess.Popen[Any], started: set[Proc], data_dir: Path) -> None:
    """A test's clean-up: the command, what it started and anything on its data dir, SIGKILLed."""
    if command.poll() is None:
        command.kill()
        command.wait()
    for leftover in left_behind(started, data_dir):
        os.kill(leftover.pid, signal.SIGKILL)
