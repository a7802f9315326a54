"""The in-container agent of the Modal test server (tests/fakes/modal_server): pid 1 of a sandbox.

Standard library only; it runs inside the sandbox's bubblewrap namespaces with /usr/bin/python3, the
way Modal's own worker serves `exec` inside a real sandbox (the SDK's filesystem API is itself
exec'd: /__modal/.bin/modal-sandbox-fs-tools, see fs_tools.py). It listens on /__modal/agent.sock;
each connection carries one JSON request line:

    {"op": "exec", "id": "e1", "argv": [...], "env": {...}, "workdir": "/repo", "timeout": 5,
     "stdout": true, "stderr": true}
        -> {"ok": true, "pid": N}; output in procs/<id>.out and .err (both exist before the
           answer), the exit status in procs/<id>.rc (code, 128 + signal, or -1 when the exec
           deadline killed it), written only once the output is complete; the
           process's stdin is a pipe the agent holds open until a "stdin" request closes it
    {"op": "stdin", "id": "e1", "eof": true} + raw bytes until the connection's end
        -> {"ok": true, "bytes": N}: the bytes went into the process's stdin (closed when eof)

Errors answer {"ok": false, "kind": "NotFound" | "Closed" | "Other", "message": ...}. The agent
reaps every process (it is pid 1) and, when the sandbox's timeout passes, kills everything and
exits, which ends the sandbox.

An exec of the filesystem tool (/__modal/.bin/modal-sandbox-fs-tools, fs_tools.py) runs the same
code in a thread of the agent instead of a fresh interpreter, with the same files and stdin pipe:
a fresh `python3` costs ~50 ms of CPU, and the SDK's filesystem API makes several of those calls
per file, so a few hundred sandboxes being polled would otherwise saturate a small machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, BinaryIO

SOCKET = "/__modal/agent.sock"
PROCS = "/__modal/procs"
FS_TOOLS = "/__modal/.bin/modal-sandbox-fs-tools"
CHUNK = 1 << 16
_fs_tools: Any = None
_fs_tools_lock = threading.Lock()


def fs_tools() -> Any:
    """fs_tools.py, loaded once from where the container has it."""
    global _fs_tools
    with _fs_tools_lock:
        if _fs_tools is None:
            import importlib.machinery
            import importlib.util

            loader = importlib.machinery.SourceFileLoader("fs_tools", FS_TOOLS)
            spec = importlib.util.spec_from_loader("fs_tools", loader)
            assert spec is not None
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            _fs_tools = module
    return _fs_tools


class Processes:
    """Exec'd processes by id; pid 1 reaps them (and every orphan) and writes their status."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: dict[int, str] = {}
        self.early: dict[int, int] = {}  # reaped before their spawn was registered
        self.timed_out: set[int] = set()
        self.stdin: dict[str, int] = {}  # exec id -> write end of its stdin pipe
        self.stdin_locks: dict[str, threading.Lock] = {}
        self.spawned = threading.Event()  # wakes the reaper when it had no children

    def spawn(self, request: dict[str, Any]) -> int:
        exec_id = str(request["id"])
        for name in ("out", "err"):  # the router may read them as soon as the exec is answered
            os.close(os.open(f"{PROCS}/{exec_id}.{name}", os.O_WRONLY | os.O_CREAT, 0o600))
        if request["argv"] and request["argv"][0] == FS_TOOLS:
            return self.run_tool(exec_id, request)
        read_end, write_end = os.pipe()
        actions: list[Any] = [(os.POSIX_SPAWN_DUP2, read_end, 0)]  # both ends are close-on-exec
        for fd, name in ((1, "stdout"), (2, "stderr")):
            target = f"{PROCS}/{exec_id}.{name[3:]}" if request.get(name, True) else os.devnull
            actions.append((os.POSIX_SPAWN_OPEN, fd, target, os.O_WRONLY | os.O_CREAT, 0o600))
        env = {
            **base_env(),
            **{k: v for k, v in (request.get("env") or {}).items() if v is not None},
        }
        workdir = request.get("workdir") or "/"
        argv = ["/bin/sh", "-c", 'cd -- "$0" || exit 126; exec "$@"', workdir, *request["argv"]]
        with self.lock:
            try:
                pid = os.posix_spawn(
                    "/bin/sh", argv, env, file_actions=actions, setpgroup=0,
                    setsigdef=(signal.SIGPIPE,),
                )  # fmt: skip
            finally:
                os.close(read_end)
            self.stdin[exec_id] = write_end
            self.stdin_locks[exec_id] = threading.Lock()
            self.spawned.set()
            if pid in self.early:
                self.finish(exec_id, self.early.pop(pid), timed_out=False)
            else:
                self.ids[pid] = exec_id
        if request.get("timeout"):
            deadline = float(request["timeout"])
            threading.Timer(deadline, self.expire, (pid,)).start()
        return pid

    def run_tool(self, exec_id: str, request: dict[str, Any]) -> int:
        """The filesystem tool in a thread (see the module doc); answers pid 0."""
        read_end, write_end = os.pipe()
        with self.lock:
            self.stdin[exec_id] = write_end
            self.stdin_locks[exec_id] = threading.Lock()
        paths = [
            f"{PROCS}/{exec_id}.{name[3:]}" if request.get(name, True) else os.devnull
            for name in ("stdout", "stderr")
        ]
        args = (exec_id, list(request["argv"][1:]), read_end, paths)
        threading.Thread(target=self._tool, args=args, daemon=True).start()
        return 0

    def _tool(self, exec_id: str, argv: list[str], read_end: int, paths: list[str]) -> None:
        code = 1
        try:  # the files are closed (every byte written) before `record` makes the status visible
            stdin = open(read_end, "rb")  # noqa: SIM115 - closed by the with below
            with stdin, open(paths[0], "wb") as out, open(paths[1], "wb") as err:
                try:
                    code = int(fs_tools().main(argv, stdin, out, err))
                except Exception as error:
                    err.write(repr(error).encode())
        finally:
            self.record(exec_id, code)

    def expire(self, pid: int) -> None:
        with self.lock:
            if pid not in self.ids:
                return
            self.timed_out.add(pid)
        for target in (-pid, pid):
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGKILL)

    def reap_forever(self) -> None:
        while True:
            self.spawned.clear()
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:  # no children: sleep until a spawn (no busy polling)
                self.spawned.wait(1.0)
                continue
            with self.lock:
                exec_id = self.ids.pop(pid, None)
                if exec_id is None:
                    self.early[pid] = status
                    if len(self.early) > 10_000:  # orphans never registered: forget the oldest
                        self.early.pop(next(iter(self.early)))
                    continue
                timed_out = pid in self.timed_out
                self.timed_out.discard(pid)
                self.finish(exec_id, status, timed_out=timed_out)

    def write_stdin(self, exec_id: str, reader: BinaryIO, eof: bool) -> int:
        """Copy the connection's bytes into the process's stdin; close it when `eof`."""
        with self.lock:
            lock = self.stdin_locks.get(exec_id)
        if lock is None:
            raise LookupError(f"no exec {exec_id}")
        total = 0
        with lock:
            fd = self.stdin.get(exec_id)
            if fd is None:
                raise EOFError(f"stdin of exec {exec_id} is closed")
            try:
                while chunk := reader.read1(CHUNK):  # type: ignore[attr-defined]
                    view = memoryview(chunk)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                        total += written
            finally:
                if eof:
                    self.stdin.pop(exec_id, None)
                    os.close(fd)
        return total

    def finish(self, exec_id: str, status: int, *, timed_out: bool) -> None:
        if timed_out:
            code = -1
        elif os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        else:
            code = 128 + os.WTERMSIG(status)
        self.record(exec_id, code)

    def record(self, exec_id: str, code: int) -> None:
        """The exec ended: close its stdin (unless a writer holds it) and write its status."""
        lock = self.stdin_locks.get(exec_id)
        if lock is not None and lock.acquire(blocking=False):
            try:  # nobody is writing: the process can read no more of its stdin
                fd = self.stdin.pop(exec_id, None)
                if fd is not None:
                    os.close(fd)
            finally:
                lock.release()
        tmp = f"{PROCS}/.{exec_id}.rc"
        with open(tmp, "w") as handle:
            handle.write(str(code))
        os.rename(tmp, f"{PROCS}/{exec_id}.rc")


def base_env() -> dict[str, str]:
    with open("/__modal/env.json") as handle:
        return dict(json.load(handle))


def handle(conn: socket.socket, processes: Processes) -> None:
    reader = conn.makefile("rb")
    try:
        request = json.loads(reader.readline())
        op = request["op"]
        if op == "exec":
            reply(conn, {"ok": True, "pid": processes.spawn(request)})
        elif op == "stdin":
            total = processes.write_stdin(str(request["id"]), reader, bool(request.get("eof")))
            reply(conn, {"ok": True, "bytes": total})
        else:
            raise ValueError(f"unknown op {op!r}")
    except LookupError as error:
        reply(conn, {"ok": False, "kind": "NotFound", "message": str(error)})
    except (EOFError, BrokenPipeError) as error:
        reply(conn, {"ok": False, "kind": "Closed", "message": str(error)})
    except Exception as error:
        reply(conn, {"ok": False, "kind": "Other", "message": repr(error)})
    finally:
        reader.close()
        conn.close()


def reply(conn: socket.socket, payload: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(payload).encode() + b"\n")


def serve(processes: Processes) -> None:
    os.makedirs(PROCS, exist_ok=True)
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET + ".tmp")
    server.listen(256)
    os.rename(SOCKET + ".tmp", SOCKET)  # the socket appears only once it accepts
    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn, processes), daemon=True).start()


def main(argv: list[str]) -> int:
    timeout = float(argv[0]) if argv else 0.0
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    with open("/__modal/ns", "w") as handle:  # lets the host find every process of the sandbox
        handle.write(os.readlink("/proc/self/ns/pid"))
    processes = Processes()
    threading.Thread(target=processes.reap_forever, daemon=True).start()
    threading.Thread(target=serve, args=(processes,), daemon=True).start()
    deadline = time.monotonic() + timeout if timeout > 0 else None
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.5)
    with open("/__modal/exit", "w") as handle:
        handle.write("timeout")
    os.kill(-1, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
