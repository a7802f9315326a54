"""Network policy per phase for `local` sandboxes: the host side of the egress proxy.

Sandboxes (runs and builds alike) keep no network interface but `lo`. When a phase may reach some
domains — a run its case's `allow_domains`, a build the package registries — the provider starts
the egress proxy (egress_proxy.py) on a unix socket outside the sandbox, binds that socket and the
forwarder (egress_forward.py) in, prefixes the command with the forwarder, and sets
HTTP(S)_PROXY. With an empty allowlist none of this happens: no socket, no proxy, no route out.

For runs the proxy is a detached process (like the runner it outlives the worker, and `terminate`
stops it); its record of allowed and denied connections is `/out/.egress.json`, which the collect
stage stores with the run's outputs. Builds run it in-process for the length of the build.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from workflows.providers.base import SandboxError
from workflows.providers.common.bwrap import Bind
from workflows.providers.common.launch import launch_detached, wait_ready
from workflows.providers.common.procs import kill, start_time, wait_gone

PROXY_SCRIPT = Path(__file__).with_name("egress_proxy.py")
FORWARDER = Path(__file__).with_name("egress_forward.py")
SOCKET_IN_SANDBOX = "/evalbot/egress.sock"
FORWARDER_IN_SANDBOX = "/evalbot/egress_forward.py"
FORWARD_PORT = 3128
RECORD_NAME = ".egress.json"
FORWARDER_FAILED = 97  # exit code of the command when the forwarder could not listen
PROXY_GRACE_S = 600  # the proxy outlives the run's wall timeout by this much at most


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{FORWARD_PORT}"
    local = "localhost,127.0.0.1,::1"
    return {
        "HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
        "NO_PROXY": local, "no_proxy": local,
    }  # fmt: skip


def wrap_command(command: str) -> str:
    """The command, after the forwarder is listening (it daemonizes once it is)."""
    forwarder = f"/usr/bin/python3 -I -S {FORWARDER_IN_SANDBOX} {FORWARD_PORT} {SOCKET_IN_SANDBOX}"
    return f"{forwarder} || exit {FORWARDER_FAILED}\n{command}"


def binds(socket_path: Path) -> list[Bind]:
    socket_bind = Bind(socket_path, SOCKET_IN_SANDBOX, writable=True)
    return [socket_bind, Bind(FORWARDER, FORWARDER_IN_SANDBOX)]


def proxy_argv(
    socket_path: Path,
    run_id: str,
    allow: Sequence[str],
    record: Path,
    resolve: Mapping[str, str],
    max_seconds: float,
) -> list[str]:
    argv = [sys.executable, "-I", "-S", str(PROXY_SCRIPT), "--socket", str(socket_path)]
    argv += ["--run-id", run_id, "--record", str(record), "--max-seconds", f"{max_seconds:g}"]
    for entry in allow:
        argv += ["--allow", entry]
    for name, address in resolve.items():
        argv += ["--resolve", f"{name}={address}"]
    return argv


async def launch_proxy(
    socket_path: Path,
    *,
    run_id: str,
    allow: Sequence[str],
    record: Path,
    log: Path,
    resolve: Mapping[str, str],
    max_seconds: float,
    timeout_s: float = 10,
) -> dict[str, int]:
    """Start the detached proxy and wait until it listens; returns its pid and start time."""
    socket_path.parent.mkdir(mode=0o711, exist_ok=True)
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    argv = proxy_argv(socket_path, run_id, allow, record, resolve, max_seconds)
    argv += ["--ready-fd", str(write_fd)]
    try:
        pid = await launch_detached(
            argv, env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}, log=log, pass_fds=[write_fd]
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    started = start_time(pid) or 0
    if not await wait_ready(read_fd, timeout_s):
        kill(pid, started)
        raise SandboxError("the egress proxy did not start (see runner.log)")
    return {"pid": pid, "start_time": started}


async def stop_proxy(proxy: Mapping[str, int] | None) -> None:
    if not proxy:
        return
    pid, started = int(proxy["pid"]), int(proxy["start_time"])
    kill(pid, started, signal.SIGTERM)
    if not await wait_gone(pid, started, 2.0):
        kill(pid, started, signal.SIGKILL)
        await wait_gone(pid, started, 2.0)
