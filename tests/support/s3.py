"""An S3 API server for tests (moto in server mode, real HTTP), and the fixtures wrapping it.

`S3Server` runs `python -m moto.server` on a free port as a subprocess; the real S3 client
(obstore) talks to it over HTTP with path-style requests. moto keeps objects in memory and
accepts any credentials, so the tests set dummy AWS_* variables.

Fixtures (registered for the whole suite by `pytest_plugins` in tests/conftest.py):

- `s3_server` (session): the running server; stopped at the end of the session.
- `s3_bucket`: a fresh, empty bucket on it and the AWS variables set for the test; its value is
  the settings changes that point the blob store at it (`settings.with_changes(**s3_bucket)`).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflows.ports import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing-key-id",
    "AWS_SECRET_ACCESS_KEY": "testing-secret-key",
    "AWS_REGION": "us-east-1",
}


class S3Unavailable(RuntimeError):
    """moto's server would not start."""


class S3Server:
    def __init__(self) -> None:
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> S3Server:
        self.port = free_port()
        self._log = Path(tempfile.mkdtemp(prefix="moto-")) / "server.log"
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._process.poll() is None:
            try:
                with urllib.request.urlopen(self.url, timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        log_text = self._log.read_text(errors="replace")[-2000:]
        self.stop()
        raise S3Unavailable(f"moto's S3 server did not become ready:\n{log_text}")

    def create_bucket(self, name: str) -> None:
        request = urllib.request.Request(f"{self.url}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A fresh bucket, the AWS variables set, and the settings changes naming it."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    bucket = f"evalbot-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    return {
        "store": {
            "blob_url": f"s3://{bucket}/runs",
            "blob_endpoint_url": s3_server.url,
            "blob_region": "us-east-1",
        }
    }
