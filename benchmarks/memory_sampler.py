"""Peak resident memory of the benchmark's processes, sampled once a second in a thread: this
process (the in-process worker, the client and the plan), each extra `evalbot worker` process and
the Temporal dev server (both children of this process). Used by `orchestration.py --memory`."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

MB = 1024 * 1024
PROC = Path("/proc")


def read(path: Path) -> str:
    """A /proc file's text, or '' if the process has gone."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def rss(pid: int | str) -> int:
    """Resident set size in bytes (VmRSS), 0 if the process has gone."""
    for line in read(PROC / str(pid) / "status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def descendants(root: int) -> list[str]:
    """The pids of `root`'s descendants, from each process's parent in /proc/PID/stat."""
    children: dict[str, list[str]] = {}
    for entry in PROC.iterdir():
        stat = read(entry / "stat") if entry.name.isdigit() else ""
        if stat:
            parent = stat.rsplit(")", 1)[1].split()[1]  # the name may hold spaces and parens
            children.setdefault(parent, []).append(entry.name)
    found, todo = [], [str(root)]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def role(pid: str) -> str | None:
    """'server', 'worker' or None (agent runners and anything else) from a command line."""
    command = read(PROC / pid / "cmdline").replace("\0", " ")
    if "start-dev" in command:
        return "server"
    if "bot worker" in command:
        return "worker"
    return None


@dataclass
class Peaks:
    """Peak RSS in bytes: this process, the largest extra worker, the dev server; samples taken."""

    own: int = 0
    worker: int = 0
    server: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def sample(self, me: int) -> None:
        self.own = max(self.own, rss(me))
        for child in descendants(me):
            kind = role(child)
            if kind == "server":
                self.server = max(self.server, rss(child))
            elif kind == "worker":
                self.worker = max(self.worker, rss(child))
        self.samples += 1

    def lines(self) -> list[str]:
        worker = f"{self.worker / MB:.0f} MB" if self.worker else "none (one worker)"
        return [
            f"peak RSS, benchmark process (in-process worker, client): {self.own / MB:.0f} MB",
            f"peak RSS, largest extra `evalbot worker` process: {worker}",
            f"peak RSS, Temporal dev server: {self.server / MB:.0f} MB",
            f"RSS samples (1 s apart): {self.samples}",
        ]


@contextmanager
def sampled(interval_s: float = 1.0) -> Iterator[Peaks]:
    """Peaks filled in by a sampling thread for the block's duration."""
    peaks, me = Peaks(), os.getpid()

    def loop() -> None:
        while not peaks.stop.is_set():
            peaks.sample(me)
            peaks.stop.wait(interval_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        peaks.stop.set()
        thread.join()
        peaks.sample(me)


async def history_size(client: Client, workflow_id: str) -> tuple[int, int]:
    """(events, serialized bytes) of a workflow's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return len(history.events), sum(event.ByteSize() for event in history.events)


async def largest_history(client: Client, workflow_ids: list[str]) -> tuple[str, int, int]:
    """(id, events, bytes) of the largest history among `workflow_ids`, by bytes."""
    sizes = [(w, *await history_size(client, w)) for w in workflow_ids]
    return max(sizes, key=lambda size: size[2])
