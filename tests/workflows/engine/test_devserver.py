"""The embedded dev server dies with the process that started it (workflows/engine/devserver.py):
a SIGKILLed evalbot must not leave a server holding temporal.db, which the next start would open
a second server on; and a second start on the same temporal.db is refused, or waits while the
first server is still stopping.

Broken builds caught: a server started without `setpriv --pdeathsig` (it outlives its parent); no
lock on temporal.db (two servers on one file); a lock the server does not inherit (a killed
command's stopping server and a new one on the same file at once); a readiness probe that takes
any listener on the port for the server, and a start that gives up when its port was taken."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.processes import processes
from workflows.engine.devserver import DevServer, DevServerBusy, listens
from workflows.ports import free_port


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


STARTER = """
import sys, time
from pathlib import Path
from workflows.engine.devserver import DevServer
from workflows.ports import free_port
server = DevServer(db_file=Path(sys.argv[1]), port=free_port()).start()
print(server.process.pid, flush=True)
time.sleep(600)
"""


def start_in_child(db_file: Path) -> tuple[subprocess.Popen[str], int]:
    """A python process that starts a dev server on `db_file`; returns it and the server's pid."""
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(db_file)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert starter.stdout is not None
    return starter, int(starter.stdout.readline())


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
@pytest.mark.timeout(120)
def test_a_killed_starter_takes_its_dev_server_with_it(tmp_path: Path) -> None:
    db_file = tmp_path / "temporal.db"
    starter, server_pid = start_in_child(db_file)
    try:
        server = processes()[server_pid]
        assert str(db_file) in server.cmdline  # the server itself, not a wrapper
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 60
        while (now := processes().get(server_pid)) is not None and now.start == server.start:
            assert time.monotonic() < deadline, "the dev server outlived its starter"
            time.sleep(0.2)  # one reading per check: the server may go between two
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if server_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGKILL)


def stop_processes(starter: subprocess.Popen[str], server_pid: int) -> None:
    if starter.poll() is None:
        starter.kill()
        starter.wait()
    with contextlib.suppress(ProcessLookupError):
        os.kill(server_pid, signal.SIGCONT)
        os.kill(server_pid, signal.SIGKILL)


@pytest.mark.timeout(120)
def test_a_second_server_on_the_same_database_is_refused(tmp_path: Path) -> None:
    db_file = tmp_path / "temporal.db"
    starter, server_pid = start_in_child(db_file)
    second = DevServer(db_file=db_file, port=free_port())
    try:
        with pytest.raises(DevServerBusy) as refused:
            second.start()
        assert second.process is None and not port_open(second.port)
        message = str(refused.value)
        assert f"evalbot process {starter.pid} " in message and str(db_file) in message
        assert "EVALBOT_DATA_DIR" in message
        servers = [p for p in processes().values() if f"--db-filename {db_file}" in p.cmdline]
        assert [p.pid for p in servers] == [server_pid]
    finally:
        stop_processes(starter, server_pid)
        second.stop()


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
@pytest.mark.timeout(180)
def test_a_new_server_waits_for_a_killed_starters_server_to_stop(tmp_path: Path) -> None:
    """The old server is frozen (SIGSTOP) before its starter is killed, so it holds temporal.db
    for as long as the test wants: the new start must wait until it has exited."""
    db_file = tmp_path / "temporal.db"
    starter, server_pid = start_in_child(db_file)
    second = DevServer(db_file=db_file, port=free_port())
    old = processes()[server_pid]
    thaw = threading.Timer(3.0, os.kill, (server_pid, signal.SIGCONT))
    try:
        os.kill(server_pid, signal.SIGSTOP)
        starter.kill()
        starter.wait()
        thaw.start()
        began = time.monotonic()
        second.start()
        waited = time.monotonic() - began
        still_there = processes().get(server_pid)
        assert still_there is None or still_there.start != old.start, "two servers at once"
        assert waited >= 2.5, f"started after {waited:.1f} s, while the old server was frozen"
        assert port_open(second.port)
    finally:
        thaw.cancel()
        stop_processes(starter, server_pid)
        second.stop()


@pytest.mark.timeout(120)
def test_a_server_whose_port_was_taken_starts_on_another_and_is_its_own(tmp_path: Path) -> None:
    with socket.socket() as squatter:  # another process got the port first
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with DevServer(db_file=tmp_path / "temporal.db", port=taken) as server:
            assert server.process is not None
            assert server.port != taken
            assert listens(server.process.pid, server.port)
            assert not listens(server.process.pid, taken)
            assert f"127.0.0.1:{server.port}" in (tmp_path / "temporal.lock").read_text()
