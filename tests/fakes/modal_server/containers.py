"""The Modal test server's containers: bubblewrap sandboxes with agent.py as pid 1.

A sandbox is a real container: new pid/ipc/uts (and, when its network is blocked or allowlisted,
network) namespaces, the sandbox's own root folder as `/`, the host's /usr and /etc read-only, its
Volumes bind-mounted (read-only when mounted `.read_only()`), fs_tools.py at
/__modal/.bin/modal-sandbox-fs-tools, and agent.py as pid 1 serving exec over a unix socket. Each
container outlives the server process that created it; `terminate` (or the sandbox's timeout) kills
it and everything in it.

Not modelled: CPU and memory limits (recorded, not enforced), the domain allowlist (an allowlisted
sandbox has no network at all here), GPUs, tunnels, memory snapshots.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from grpclib import GRPCError, Status

from tests.fakes.modal_server.state import container_running, write_json
from workflows.providers.common.launch import launch_detached
from workflows.providers.common.procs import is_alive, kill, start_time

HERE = Path(__file__).parent
AGENT = HERE / "agent.py"
FS_TOOLS = HERE / "fs_tools.py"
PYTHON = "/usr/bin/python3"
SYSTEM_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
MOUNTPOINTS = ("usr", "etc", "proc", "dev", "__modal")
NOT_IN_SNAPSHOTS = {*SYSTEM_LINKS, *MOUNTPOINTS, "mnt"}
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
POLL_S = 0.01


async def copy_tree(source: Path, dest: Path, skip: Iterable[str] = ()) -> None:
    dest.mkdir(parents=True)
    names = [p.name for p in source.iterdir() if p.name not in set(skip)]
    if not names:
        return
    process = await asyncio.create_subprocess_exec(
        "cp", "-a", "--reflink=auto", "--", *(str(source / n) for n in names), str(dest),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, error = await process.communicate()
    if process.returncode != 0:
        raise GRPCError(Status.INTERNAL, f"copying the file system failed: {error.decode()[-300:]}")


async def launch(
    folder: Path, rootfs: Path, meta: dict[str, Any], env: dict[str, str], delay_s: float = 0.0
) -> None:
    """Create the sandbox's root from the image and start its container (meta.json gets the
    monitor's pid)."""
    root, ctl = folder / "root", folder / "ctl"
    await copy_tree(rootfs, root)
    await asyncio.to_thread(_prepare_root, root, meta["mounts"])
    (ctl / "procs").mkdir(parents=True)
    write_json(ctl / "env.json", env)
    write_json(folder / "meta.json", meta)
    argv = _bwrap(root, ctl, meta)
    pid = await launch_detached(argv, env=dict(BASE_ENV), log=folder / "launch.log")
    if delay_s:
        await asyncio.sleep(delay_s)
    meta["monitor"] = {"pid": pid, "start_time": start_time(pid) or 0}
    write_json(folder / "meta.json", meta)


def _prepare_root(root: Path, mounts: Mapping[str, Mapping[str, Any]]) -> None:
    for name, target in SYSTEM_LINKS.items():
        if not os.path.lexists(root / name):
            os.symlink(target, root / name)
    for name in (*MOUNTPOINTS, "tmp", "root"):
        (root / name).mkdir(exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    for path in mounts:
        (root / path.strip("/")).mkdir(parents=True, exist_ok=True)


def _bwrap(root: Path, ctl: Path, meta: Mapping[str, Any]) -> list[str]:
    argv = ["bwrap", "--bind", str(root), "/", "--ro-bind", "/usr", "/usr"]
    argv += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev"]
    argv += ["--bind", str(ctl), "/__modal"]
    for path, mount in meta["mounts"].items():
        argv += ["--ro-bind" if mount["read_only"] else "--bind", mount["source"], path]
    argv += ["--ro-bind", str(AGENT), "/__modal/agent.py"]
    argv += ["--ro-bind", str(FS_TOOLS), "/__modal/.bin/modal-sandbox-fs-tools"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "modal"]
    if meta["network"] != "open":
        argv.append("--unshare-net")
    # No --die-with-parent: bwrap's parent is the launcher shell, which exits at once (the
    # container must outlive whoever created it); terminate kills the namespace instead.
    argv += ["--as-pid-1", "--chdir", "/"]
    return [*argv, PYTHON, "-I", "-S", "/__modal/agent.py", str(meta["timeout"] or 0)]


# -- lifecycle ------------------------------------------------------------------------------------


def timed_out(folder: Path) -> bool:
    with contextlib.suppress(OSError):
        return (folder / "ctl" / "exit").read_text() == "timeout"
    return False


async def wait_ready(folder: Path, meta: Mapping[str, Any]) -> None:
    """Until the container accepts calls: `start_latency_s` after creation, and its agent is up.
    Raises NOT_FOUND when the sandbox ended."""
    delay = meta["ready_at"] - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    socket_path = folder / "ctl" / "agent.sock"
    deadline = time.monotonic() + 30
    while not socket_path.exists():
        if not container_running(meta) or time.monotonic() > deadline:
            break
        await asyncio.sleep(POLL_S)
    if not container_running(meta):
        raise GRPCError(Status.NOT_FOUND, f"Task for Sandbox {meta['id']} has finished")


def terminate(folder: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """SIGKILL every process of the container (its pid 1 first: the kernel then kills the rest),
    then the bwrap monitor, and wait until none is left. Returns the updated meta."""
    monitor = meta.get("monitor")
    ns_file = folder / "ctl" / "ns"
    deadline = time.monotonic() + 5
    while monitor and container_running(meta) and not ns_file.exists():
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_S)  # the container is still coming up: wait for its namespace
    _kill_namespace(ns_file)
    if monitor and is_alive(monitor["pid"], monitor["start_time"]):
        kill(monitor["pid"], monitor["start_time"], signal.SIGKILL)
    _wait_namespace_empty(ns_file)
    if meta.get("terminated_at") is None:
        meta["terminated_at"] = time.time()
        meta["finish"] = "timeout" if timed_out(folder) else "terminated"
        write_json(folder / "meta.json", meta)
    shutil.rmtree(folder / "root", ignore_errors=True)
    return meta


def kill_now(folder: Path, meta: Mapping[str, Any]) -> None:
    """SIGKILL the container's processes and its monitor without waiting (terminate does the
    rest)."""
    _kill_namespace(folder / "ctl" / "ns")
    monitor = meta.get("monitor")
    if monitor and is_alive(monitor["pid"], monitor["start_time"]):
        kill(monitor["pid"], monitor["start_time"], signal.SIGKILL)


def finish_of(folder: Path, meta: Mapping[str, Any]) -> str | None:
    """None while running, else "terminated" | "timeout" | "exited"."""
    if meta.get("finish"):
        return str(meta["finish"])
    if container_running(meta):
        return None
    return "timeout" if timed_out(folder) else "exited"


def _pids_in(namespace: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _in_namespace(pid, namespace):
            found.append(int(pid))
    return found


def _kill_namespace(ns_file: Path) -> None:
    try:
        namespace = ns_file.read_text()
    except OSError:
        return
    for pid in _pids_in(namespace):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _wait_namespace_empty(ns_file: Path, timeout_s: float = 10) -> None:
    try:
        namespace = ns_file.read_text()
    except OSError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pids_in(namespace):
        time.sleep(POLL_S)


def _in_namespace(pid: str, namespace: str) -> bool:
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
            return False
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


# -- the agent ------------------------------------------------------------------------------------


async def agent_call(
    folder: Path, request: dict[str, Any], body: AsyncIterator[bytes] | None = None
) -> dict[str, Any]:
    """One request to the container's agent; `body` is streamed after the request line."""
    reader, writer = await _connect(folder)
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        if body is not None:
            async for chunk in body:
                writer.write(chunk)
                await writer.drain()
        writer.write_eof()
        with contextlib.suppress(ConnectionResetError):  # the agent answered and closed first
            await writer.drain()
        line = await reader.readline()
    finally:
        writer.close()
    if not line:
        raise GRPCError(Status.NOT_FOUND, "the Sandbox's container went away")
    return dict(json.loads(line))


async def _connect(folder: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The agent's socket, through /proc/self/fd (its real path may exceed 108 bytes)."""
    fd = os.open(folder / "ctl", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return await asyncio.open_unix_connection(f"/proc/self/fd/{fd}/agent.sock")
    except (FileNotFoundError, ConnectionRefusedError):
        raise GRPCError(Status.NOT_FOUND, "the Sandbox's container is not running") from None
    finally:
        os.close(fd)


def exec_paths(folder: Path, exec_id: str) -> tuple[Path, Path, Path]:
    procs = folder / "ctl" / "procs"
    return procs / f"{exec_id}.out", procs / f"{exec_id}.err", procs / f"{exec_id}.rc"


def exit_code(folder: Path, exec_id: str) -> int | None:
    """The exec's status as the agent wrote it: code, 128 + signal, -1 (its deadline killed it)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        return int(exec_paths(folder, exec_id)[2].read_text())
    return None
