"""The embedded dev server dies with the process that started it (workflows/engine/devserver.py):
a SIGKILLed evalbot must not leave a server holding temporal.db, which the next start would open
a second server on.

Broken build caught: a server started without `setpriv --pdeathsig` (it outlives its parent)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import processes

STARTER = """
import sys, time
from pathlib import Path
from workflows.engine.devserver import DevServer, free_port
server = DevServer(db_file=Path(sys.argv[1]), port=free_port()).start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
@pytest.mark.timeout(120)
def test_a_killed_starter_takes_its_dev_server_with_it(tmp_path: Path) -> None:
    db_file = tmp_path / "temporal.db"
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(db_file)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    server_pid = 0
    try:
        assert starter.stdout is not None
        server_pid = int(starter.stdout.readline())
        server = processes()[server_pid]
        assert str(db_file) in server.cmdline  # the server itself, not a wrapper
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 60
        while server_pid in processes() and processes()[server_pid].start == server.start:
            assert time.monotonic() < deadline, "the dev server outlived its starter"
            time.sleep(0.2)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if server_pid and server_pid in processes():
            os.kill(server_pid, signal.SIGKILL)
