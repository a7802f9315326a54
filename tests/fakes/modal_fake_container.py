"""The in-container agent of the fake Modal (tests/fakes/modal_fake.py): pid 1 of a sandbox.

Standard library only; it runs inside the sandbox's bubblewrap namespaces with /usr/bin/python3, the
way Modal's own container agent serves `exec` and the filesystem tools inside a real sandbox. It
listens on /__modal/agent.sock; each connection carries one JSON request line:

    {"op": "exec", "id": "e1", "argv": [...], "env": {...}, "workdir": "/repo", "timeout": 5,
     "stdout": true, "stderr": true}
        -> {"ok": true, "pid": N}; output in procs/<id>.out and .err, the exit status in
           procs/<id>.rc (code, 128 + signal, or -1 when the exec deadline killed it)
    {"op": "stat" | "list" | "mkdir" | "remove", "path": ...}  -> {"ok": true, ...}
    {"op": "read", "path": ...}              -> {"ok": true, "size": N} then the raw bytes
    {"op": "write", "path": ...} + raw bytes -> {"ok": true, "bytes": N}

Errors answer {"ok": false, "kind": "NotFound" | "NotDirectory" | "IsDirectory" | ... | "Other",
"message": ...}. Paths are the container's: symlinks resolve inside the sandbox, exactly as in a
real container. The agent reaps every process (it is pid 1) and, when the sandbox's timeout passes,
kills everything and exits, which ends the sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import stat
import sys
import threading
import time

SOCKET = "/__modal/agent.sock"
PROCS = "/__modal/procs"
CHUNK = 1 << 16
KINDS = {
    errno.ENOENT: "NotFound",
    errno.ENOTDIR: "NotDirectory",
    errno.EISDIR: "IsDirectory",
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EEXIST: "AlreadyExists",
    errno.ENOTEMPTY: "DirectoryNotEmpty",
}
TYPES = {stat.S_IFDIR: "directory", stat.S_IFLNK: "symlink"}


class Processes:
    """Exec'd processes by id; pid 1 reaps them (and every orphan) and writes their status."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: dict[int, str] = {}
        self.early: dict[int, int] = {}  # reaped before their spawn was registered
        self.timed_out: set[int] = set()

    def spawn(self, request: dict) -> int:
        exec_id = str(request["id"])
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
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
            pid = os.posix_spawn("/bin/sh", argv, env, file_actions=actions, setpgroup=0)
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

    @staticmethod
    def finish(exec_id: str, status: int, *, timed_out: bool) -> None:
        if timed_out:
            code = -1
        elif os.WIFEXITED(status):
            code = os.WEXITSTATUS(status)
        else:
            code = 128 + os.WTERMSIG(status)
        tmp = f"{PROCS}/.{exec_id}.rc"
        with open(tmp, "w") as handle:
            handle.write(str(code))
        os.rename(tmp, f"{PROCS}/{exec_id}.rc")


def base_env() -> dict[str, str]:
    with open("/__modal/env.json") as handle:
        return dict(json.load(handle))


def file_info(path: str, name: str | None = None) -> dict:
    info = os.lstat(path)
    kind = TYPES.get(stat.S_IFMT(info.st_mode), "file")
    return {
        "name": name if name is not None else os.path.basename(path.rstrip("/")) or "/",
        "path": path,
        "type": kind,
        "size": info.st_size,
        "mode": info.st_mode,
        "permissions": stat.filemode(info.st_mode),
        "owner": str(info.st_uid),
        "group": str(info.st_gid),
        "modified_time": info.st_mtime,
        "symlink_target": os.readlink(path) if kind == "symlink" else None,
    }


def handle(conn: socket.socket, processes: Processes) -> None:
    reader = conn.makefile("rb")
    try:
        request = json.loads(reader.readline())
        op = request["op"]
        if op == "read":
            send_file(conn, request["path"])
            return
        if op == "write":
            reply(conn, {"ok": True, "bytes": receive_file(reader, request["path"])})
            return
        reply(conn, {"ok": True, **answer(op, request, processes)})
    except OSError as error:
        kind = KINDS.get(error.errno or 0, "Other")
        reply(conn, {"ok": False, "kind": kind, "message": error.strerror or str(error)})
    except Exception as error:
        reply(conn, {"ok": False, "kind": "Other", "message": repr(error)})
    finally:
        reader.close()
        conn.close()


def answer(op: str, request: dict, processes: Processes) -> dict:
    path = request.get("path", "")
    if op == "exec":
        return {"pid": processes.spawn(request)}
    if op == "stat":
        return {"info": file_info(path)}
    if op == "list":
        with os.scandir(path) as entries:
            names = sorted(entry.name for entry in entries)
        return {"entries": [file_info(os.path.join(path, n), n) for n in names]}
    if op == "mkdir":
        if request.get("parents", True):
            os.makedirs(path, exist_ok=True)
        else:
            os.mkdir(path)
        return {}
    if op == "remove":
        remove(path, bool(request.get("recursive")))
        return {}
    raise ValueError(f"unknown op {op!r}")


def remove(path: str, recursive: bool) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        if recursive:
            for top, dirs, files in os.walk(path, topdown=False):
                for name in files:
                    os.unlink(os.path.join(top, name))
                for name in dirs:
                    child = os.path.join(top, name)
                    (os.unlink if os.path.islink(child) else os.rmdir)(child)
        os.rmdir(path)
    else:
        os.unlink(path)


def reply(conn: socket.socket, payload: dict) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(payload).encode() + b"\n")


def send_file(conn: socket.socket, path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        os.set_blocking(fd, True)
        reply(conn, {"ok": True, "size": info.st_size})
        while chunk := os.read(fd, CHUNK):
            conn.sendall(chunk)
    finally:
        os.close(fd)


def receive_file(reader, path: str) -> int:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    total = 0
    with open(path, "wb") as handle:
        while chunk := reader.read1(CHUNK):
            handle.write(chunk)
            total += len(chunk)
    return total


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
