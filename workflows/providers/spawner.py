"""The process provider's runners, forked by one long-lived `runner.py --serve` process.

Starting a runner through `launch_detached` costs a fork of the (large) worker, a shell, and a
fresh interpreter importing the runner: ~22 ms of CPU per run, most of a trivial run's cost. The
spawner is started once per provider and forks an already-imported runner per request (~1 ms).
Its runners are detached exactly as `launch_detached` detaches them, so they outlive the worker
and the spawner alike, and a retried `execute` reattaches to them the same way. The worker talks to
it over a private socket pair; when the worker dies the spawner sees EOF and exits. A spawner that
died is replaced at the next request. The `local` provider asks it for bubblewrap instead
(`spawn_exec`): a child that joins the sandbox's cgroups and executes bubblewrap, instead of a
fork of the worker and a shell. Given a `launcher` (launch.c, compiled by the provider), that
child is the launcher, started with posix_spawn; without one, a fork of this small process.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from workflows.providers.base import SandboxError
from workflows.providers.common import RUNNER

REPLY_BYTES = 1 << 16


class RunnerSpawner:
    def __init__(self, python: str, runner: Path = RUNNER) -> None:
        self._command = [python, "-I", "-S", str(runner), "--serve"]
        self.launcher: Path | None = None  # launch.c compiled: exec requests without a fork
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._lock = threading.Lock()  # one request in flight: replies carry no request id

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        ready_fd: int,
        started: Callable[[int], None] | None = None,
    ) -> int:
        """Start a detached runner with these arguments (without --ready-fd, which is added)
        and environment, appending its output to `log`; its pid (`started`: as for
        `spawn_exec`)."""
        request = {"argv": list(argv), "env": dict(env), "log": str(log)}
        return await self._pid_of(request, [ready_fd], started)

    async def spawn_exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path,
        cgroup_procs: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        namespace: tuple[int, Path] | None = None,
        network: int | None = None,
        started: Callable[[int], None] | None = None,
    ) -> int:
        """Start `argv` detached, as `launch_detached` does (inside the cgroups of
        `cgroup_procs` before its first instruction, its output appended to `log`), with
        `pass_fds` open at the same numbers; its pid. A child that fails before its exec says so
        in the log and exits. `namespace`: a launch mount namespace's descriptor and the folder
        whose mounts go with the command into it (launch.c; only the launcher uses it).
        `network`: a network namespace's descriptor, which the command starts in (launch.c; only
        the launcher joins one: a spawner without it refuses the request).
        `started`: called with the pid in the thread that asked, before this returns (the
        caller's record of it, without a hop of its own)."""
        request: dict[str, object] = {
            "exec": list(argv),
            "env": dict(env),
            "log": str(log),
            "cgroup_procs": [str(path) for path in cgroup_procs],
            "fds": list(pass_fds),
        }
        fds = list(pass_fds)
        if network is not None:
            request["network"] = True
            fds.append(network)
        if namespace is not None:
            request["attach"] = str(namespace[1])
            fds.append(namespace[0])
        return await self._pid_of(request, fds, started)

    async def _pid_of(
        self,
        request: Mapping[str, object],
        fds: list[int],
        started: Callable[[int], None] | None = None,
    ) -> int:
        return await asyncio.to_thread(self._started, json.dumps(request).encode(), fds, started)

    def _started(
        self, request: bytes, fds: list[int], started: Callable[[int], None] | None
    ) -> int:
        reply = self._request(request, fds)
        pid = reply.get("pid")
        if not isinstance(pid, int):
            raise SandboxError(f"could not launch the runner: {reply.get('error', reply)}")
        if started is not None:
            started(pid)
        return pid

    def _request(self, request: bytes, fds: list[int]) -> dict[str, object]:
        with self._lock:
            channel = self._sent(request, fds)
            reply = _read_line(channel)
            if not reply.endswith(b"\n"):  # it died after taking the request: whether a runner
                self._close()  # started is unknown (docs/sandbox.md); the stage fails, is retried
                raise SandboxError("the runner spawner exited while starting a runner")
        answer: dict[str, object] = json.loads(reply)
        return answer

    def _sent(self, request: bytes, fds: list[int]) -> socket.socket:
        """Send to the running spawner, or, if it is gone (nothing was started), to a new one."""
        for _ in range(2):
            channel = self._connected()
            try:
                header = len(request).to_bytes(4, "big")
                socket.send_fds(channel, [header], fds)
                channel.sendall(request)
                return channel
            except OSError:
                self._close()
        raise SandboxError("the runner spawner does not take requests")

    def _connected(self) -> socket.socket:
        if self._process is not None and self._process.poll() is not None:
            self._close()  # it exited (killed?): its runners live on, requests go to a new one
        if self._channel is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with theirs:
                launcher = [str(self.launcher)] if self.launcher else []
                self._process = subprocess.Popen(
                    [*self._command, str(theirs.fileno()), *launcher],
                    pass_fds=[theirs.fileno()],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    cwd="/",
                    start_new_session=True,  # a ^C to the worker's group is not for it
                )
            self._channel = ours
        return self._channel

    def _close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._process is not None:
            try:
                self._process.wait(timeout=5)  # EOF ends it
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def close(self) -> None:
        with self._lock:
            self._close()

    @property
    def pid(self) -> int | None:
        """The spawner's pid while one runs (for tests)."""
        return self._process.pid if self._process is not None else None


def _read_line(channel: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n") and len(line) < REPLY_BYTES:
        try:
            chunk = channel.recv(REPLY_BYTES)
        except OSError:
            break
        if not chunk:
            break
        line += chunk
    return line
