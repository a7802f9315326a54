"""The session's Modal test server (tests/fakes/modal_server), and the pytest fixture wrapping it.

Fixtures (registered for the whole suite by `pytest_plugins` in tests/conftest.py):

- `modal_server` (session): one running server for the session, its cloud under a temporary folder;
  the process environment points the real `modal` SDK at it (MODAL_SERVER_URL, the test token,
  an empty MODAL_CONFIG_PATH) until the session ends, since the SDK's default client is a
  per-process singleton. Tests sharing it use their own App, Volume and Secret names, and restore
  the knobs they change (`modal_server.configure(...)`). Skipped, with one line saying why, where
  bubblewrap cannot run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fakes.modal_server.fixture import ModalTestServer


@pytest.fixture(scope="session")
def modal_server() -> Iterator[ModalTestServer]:
    # Imported here: every session loads this plugin, few use the server.
    from tests.fakes.modal_server.fixture import ModalTestServer, host_problem, running_modal_server

    problem = host_problem()
    if problem:
        pytest.skip(f"Modal test server unavailable: {problem}")
    root = Path(tempfile.mkdtemp(prefix="modal-cloud-"))
    saved = {key: os.environ.get(key) for key in ModalTestServer.ENV_KEYS}
    try:
        with running_modal_server(root / "cloud") as server:
            os.environ.update(server.env)
            yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)
