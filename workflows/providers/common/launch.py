"""Starting host processes: detached runners that outlive the worker, and bounded short commands.

A runner must survive the worker that started it (a retried activity on a new worker reattaches
to it), so it is started through a throw-away shell: the shell joins the sandbox's cgroups, starts
the runner in the background and exits. The runner is then nobody's child but init's; nothing ties
it to the worker's life, and it was inside its cgroups before its first instruction.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from workflows.providers.base import ExecResult, SandboxError

# $1 = log file, then cgroup.procs files up to "--", then the command.
DETACH_SCRIPT = """
log=$1; shift
while [ "$1" != "--" ]; do echo $$ > "$1" || exit 90; shift; done; shift
"$@" </dev/null >>"$log" 2>&1 &
echo $!
"""
# cgroup.procs files up to "--", then the command, which replaces the shell.
JOIN_SCRIPT = """
while [ "$1" != "--" ]; do echo $$ > "$1" || exit 90; shift; done; shift
exec "$@"
"""


def joined(cgroup_procs: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """`argv`, run after moving itself into the given cgroups (no-op when there are none)."""
    if not cgroup_procs:
        return list(argv)
    return ["/bin/sh", "-c", JOIN_SCRIPT, "join", *map(str, cgroup_procs), "--", *argv]


async def launch_detached(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    log: Path,
    cgroup_procs: Sequence[Path] = (),
    pass_fds: Sequence[int] = (),
) -> int:
    """Start `argv` detached (see module doc) and return its pid."""
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", DETACH_SCRIPT, "launch", str(log), *map(str, cgroup_procs), "--", *argv,
        env=env,
        cwd="/",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
    )  # fmt: skip
    stdout, stderr = await process.communicate()
    pid = stdout.strip()
    if process.returncode != 0 or not pid.isdigit():
        detail = stderr.decode(errors="replace").strip()[-300:] or f"exit {process.returncode}"
        raise SandboxError(f"could not launch the runner: {detail}")
    return int(pid)


async def wait_ready(read_fd: int, timeout_s: float) -> bool:
    """Wait for the runner's "ready" on a pipe; False if the pipe closed first or time ran out."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[bool] = loop.create_future()

    def on_readable() -> None:
        try:
            data = os.read(read_fd, 64)
        except BlockingIOError:
            return
        if not ready.done():
            ready.set_result(data.startswith(b"ready"))

    os.set_blocking(read_fd, False)
    loop.add_reader(read_fd, on_readable)
    try:
        return await asyncio.wait_for(ready, timeout_s)
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)


async def _drain(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    kept = bytearray()
    if stream is None:
        return b""
    while chunk := await stream.read(1 << 16):
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept)


async def run_bounded(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: str | Path,
    timeout_s: float,
    max_output: int = 1 << 20,
    pass_fds: Sequence[int] = (),
) -> ExecResult:
    """Run to completion in its own session; keep at most `max_output` bytes of each stream.
    A negative exit code means "killed by that signal". Timeout: everything killed, SandboxError."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
    )
    work = asyncio.gather(
        _drain(process.stdout, max_output), _drain(process.stderr, max_output), process.wait()
    )
    try:
        stdout, stderr, code = await asyncio.wait_for(work, timeout_s)
    except BaseException as error:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if isinstance(error, TimeoutError):
            raise SandboxError(f"the command did not finish within {timeout_s:g} s") from None
        raise
    return ExecResult(exit_code=code, stdout=stdout, stderr=stderr)
