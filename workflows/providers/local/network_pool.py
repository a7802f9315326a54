"""Network namespaces for `local` sandboxes, each serving one sandbox at a time and reused after it
(docs/sandbox.md, "A network namespace per sandbox, reused").

A network namespace was the dearest kernel part of a bubblewrap start, half of it paid in a
kernel thread after the sandbox is gone (a profile by hand, docs/sandbox.md, "A network namespace
per sandbox, reused"). So the provider keeps the namespaces it made: a holder
(`launch --hold-network`) makes one with its loopback up, this pool keeps a descriptor of it, and
the launcher joins it before it executes bubblewrap, which then makes no network namespace of its
own. A namespace serves one sandbox from its start until its teardown has killed every process
in it — the evidence on which the sandbox's uid is reused too — and then the next one. No process
of the old sandbox is left to hold a socket, and none could change the namespace itself (its
interfaces, routes, filters): that takes CAP_NET_ADMIN over it, which no sandbox process has.

A sandbox torn down by another worker of the host never comes back to this pool by `release`;
when the pool has none idle, it takes back those whose sandbox's folder is gone (teardown
removes the folder after the kill) before it makes a new one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from workflows.providers.local.namespace_holder import namespace_from_holder

log = logging.getLogger(__name__)


class NetworkPool:
    def __init__(self, launcher: Path, gone: Callable[[str], bool]) -> None:
        """`gone(sandbox_id)`: whether that sandbox has been torn down (its processes killed)."""
        self._holder = [str(launcher), "--hold-network"]
        self._gone = gone
        self._idle: list[int] = []
        self._serving: dict[str, int] = {}
        self._lock = threading.Lock()
        self._failed = False

    async def claim(self, sandbox_id: str) -> int | None:
        """A descriptor of `sandbox_id`'s namespace for one launch, which the caller closes: the one
        it has, an idle one, or a new one (made in a thread). None where none can be made (said in
        the log once): bubblewrap then makes the sandbox's namespace itself."""
        with self._lock:
            held = self._serving.get(sandbox_id)
            if held is None and self._idle:
                held = self._serving[sandbox_id] = self._idle.pop()
            if held is not None:
                return os.dup(held)
        return await asyncio.to_thread(self._claim_slowly, sandbox_id)

    def _claim_slowly(self, sandbox_id: str) -> int | None:
        with self._lock:
            if sandbox_id not in self._serving:
                self._take_back_gone()
                if self._idle:
                    self._serving[sandbox_id] = self._idle.pop()
            if sandbox_id in self._serving:
                return os.dup(self._serving[sandbox_id])
        made = self._made()  # outside the lock: a holder takes milliseconds
        if made is None:
            return None
        with self._lock:
            held = self._serving.setdefault(sandbox_id, made)
            if held != made:  # a claim for the same sandbox got there first
                self._idle.append(made)
            return os.dup(held)

    def _take_back_gone(self) -> None:
        for sandbox_id in [i for i in self._serving if self._gone(i)]:
            self._idle.append(self._serving.pop(sandbox_id))

    def _made(self) -> int | None:
        if self._failed:
            return None
        made, why = namespace_from_holder(self._holder, "net")
        if made is None:
            self._failed = True
            log.warning("evalbot: each sandbox makes its own network namespace (%s)", why)
        return made

    def release(self, sandbox_id: str) -> None:
        """`sandbox_id` was torn down: every process in it is dead, so its namespace may serve
        another."""
        with self._lock:
            held = self._serving.pop(sandbox_id, None)
            if held is not None:
                self._idle.append(held)

    def close(self) -> None:
        """Close every descriptor; a namespace still serving a sandbox lives on with it."""
        with self._lock:
            for held in [*self._idle, *self._serving.values()]:
                os.close(held)
            self._idle.clear()
            self._serving.clear()

    @property
    def sizes(self) -> tuple[int, int]:
        """(idle, serving): for tests and benchmarks."""
        with self._lock:
            return len(self._idle), len(self._serving)
