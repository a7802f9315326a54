"""The in-container agent of the Modal test server (tests/fakes/modal_server): pid 1 of a sandbox.

Standard library only; it runs inside the sandbox's bubblewrap namespaces with /usr/bin/python3, the
way Modal's own worker serves `exec` inside a real sandbox (the SDK's filesystem API is itself
exec'd: /__modal/.bin/modal-sandbox-fs-tools, see fs_tools.py). It listens on /__modal/agent.sock;
each connection carries one JSON request line:

    {"op": "exec", "id": "e1", "argv": [...], "env": {...}, "workdir": "/repo", "timeout": 5,
     "stdout": true, "stderr": true}
        -> {"ok": true, "pid": N}; output in procs/<id>.out and .err, the exit status in
           procs/<id>.rc (code, 128 + signal, or -1 when the exec deadline killed it); the
           process's stdin is a pipe the agent holds open until a "stdin" request closes it
    {"op": "stdin", "id": "e1", "eof": true} + raw bytes until the connection's end
        -> {"ok": true, "bytes": N}: the bytes went into the process's stdin (closed when eof)

Errors answer {"ok": false, "kind": "NotFound" | "Closed" | "Other", "message": ...}. The agent
reaps every process (it is pid 1) and, when the sandbox's timeout passes, kills everything and
exits, which ends the sandbox.
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
CHUNK = 1 << 16


class Processes:
    """Exec'd processes by id; pid 1 reaps them (and every orphan) and writes their status."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: dict[int, str] = {}
        self.early: dict[int, int] = {}  # reaped before their spawn was registered
        self.timed_out: set[int] = set()
        self.stdin: dict[str, int] = {}  # exec id -> write end of its stdin pipe
        self.stdin_locks: dict[str, threading.Lock] = {}

    def spawn(self, request: dict[str, Any]) -> int:
        exec_id = str(request["id"])
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
            if pid in self.early:
                self.finish(exec_id, self.early.pop(pid), timed_out=False)
            else:
                self.ids[pid] = exec_id
        if request.get("timeout"):
            deadline = float(request["timeout"])
            threading.Timer(deadline, self.expire, (pid,)).start()
        return pid

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
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.02)
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
