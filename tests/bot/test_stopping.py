"""`evalbot serve` and `evalbot worker` (embedded defaults, a temp data dir) stop cleanly on
SIGTERM and on SIGINT: exit 0 within the graceful timeout, and leave no process they started (the
embedded Temporal dev server above all: an orphan keeps the data dir's temporal.db open, and the
next start opens a second server on it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.processes import Proc, descendants, kill_leftovers, left_behind, processes
from workflows.ports import free_port

START_TIMEOUT_S = 300  # a loaded machine imports and starts the dev server slowly
GRACE_S = 5
STOP_TIMEOUT_S = GRACE_S + 60  # the grace, then stopping the dev server and interpreter exit


@dataclass
class Command:
    argv: list[str]
    ready: str  # "http" (GET /healthz) or a line the command prints when it is ready


COMMANDS = {
    "serve": lambda port: Command(["serve", "--port", str(port)], "http"),
    "worker": lambda port: Command(["worker"], "evalbot worker: serving"),
}


def start(
    command: Command, data_dir: Path, log: Path, keep: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """`keep`: prefixes of EVALBOT_ variables passed on from this environment."""
    own = {k: v for k, v in os.environ.items() if k.startswith("EVALBOT_") and k.startswith(keep)}
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")}
        | own
        | {
            "EVALBOT_DATA_DIR": str(data_dir),
            "EVALBOT_GITHUB_WEBHOOK_SECRET": "secret",
            "EVALBOT_GITHUB_TOKEN": "ghs_test",
            "EVALBOT_GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
            "EVALBOT_GRACEFUL_SHUTDOWN_S": str(GRACE_S),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *command.argv],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def wait_ready(process: subprocess.Popen[bytes], command: Command, log: Path, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert process.poll() is None, log.read_text()
        if command.ready == "http":
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        elif command.ready in log.read_text():
            return
        assert time.monotonic() < deadline, f"did not start: {log.read_text()}"
        time.sleep(0.3)


@pytest.mark.timeout(START_TIMEOUT_S + STOP_TIMEOUT_S + 60)
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_signal_stops_the_command_and_everything_it_started(
    name: str, stop_signal: signal.Signals, tmp_path: Path
) -> None:
    data_dir, log, port = tmp_path / "state", tmp_path / "command.log", free_port()
    command = COMMANDS[name](port)
    process = start(command, data_dir, log)
    started: set[Proc] = set()
    try:
        wait_ready(process, command, log, port)
        started = descendants(process.pid, processes())
        assert any("temporal" in p.cmdline for p in started), started  # the embedded dev server
        process.send_signal(stop_signal)
        code = process.wait(timeout=STOP_TIMEOUT_S)
        residue = left_behind(started, data_dir)  # before any clean-up below
        assert code == 0, log.read_text()
        assert residue == set(), residue
        assert "stopped" in log.read_text()
    finally:
        kill_leftovers(process, started, data_dir)
