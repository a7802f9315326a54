"""`evalbot run --workers N` (bot/extra_workers.py) through the real entry point, on embedded
defaults: the extra `evalbot worker` processes take part in the experiment, store each result
once between them, and stop with the command — or on their own when it is killed.

Broken builds caught: extra workers that do not start or serve another server (the command
fails, or they store nothing), a result stored twice or lost (the shares do not add up to the
cells), workers left running after the command (the residue check), workers or an embedded dev
server (workflows/engine/devserver.py) that outlive a killed command. Not caught: starting the
experiment before the workers are ready (they may still get cells)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from tests.support.cli import evalbot
from tests.support.processes import Proc, descendants, kill_leftovers, left_behind, processes

CELLS = 20  # 5 tiny cases x 2 arms x 2 trials
ONE_CELL_A_WORKFLOW = {"EVALBOT_RUN_BATCH_SIZE": "1", "EVALBOT_GRACEFUL_SHUTDOWN_S": "5"}
SHARES = re.compile(r"workers: (\d+) processes stored ([\d, ]+) run results")
STORED = re.compile(r"evalbot worker: stopped; (\d+) run results? stored here")


@pytest.fixture
def repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")


def run_args(repo: AgentRepo) -> list[str]:
    return [
        "run", "--repo", str(repo.path), "--dataset", "tiny", "--base", repo.base,
        "--head", repo.head, "--trials", "2", "--workers", "2",
    ]  # fmt: skip


def workers_on(data_dir: Path) -> set[int]:
    """Extra workers (`--parent-pid`) serving `data_dir`, by their environment."""
    found = set()
    for proc in processes().values():
        if "--parent-pid" not in proc.cmdline:
            continue
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"EVALBOT_DATA_DIR={data_dir}".encode() in environ:
            found.add(proc.pid)
    return found


@pytest.mark.timeout(600)
def test_two_workers_share_the_cells_and_stop_with_the_command(
    tmp_path: Path, repo: AgentRepo
) -> None:
    data = tmp_path / "state"
    ran = evalbot(data, TINY_CATALOG, *run_args(repo), env=ONE_CELL_A_WORKFLOW)
    assert workers_on(data) == set(), "an extra worker outlived the command"
    assert ran.returncode == 0, ran.stderr
    shares = SHARES.search(ran.stderr)
    assert shares is not None, ran.stderr
    counts = [int(count) for count in shares.group(2).split(", ")]
    assert shares.group(1) == "2" and len(counts) == 2
    assert sum(counts) == CELLS, counts  # every result stored once, by one of the two
    assert min(counts) >= 1, counts  # the extra worker took part


@pytest.mark.timeout(600)
def test_extra_workers_stop_when_the_command_is_killed(tmp_path: Path, repo: AgentRepo) -> None:
    data, output = tmp_path / "state", tmp_path / "run.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")} | {
        "EVALBOT_DATA_DIR": str(data),
        "EVALBOT_CATALOG_ROOT": str(TINY_CATALOG),
        "PYTHONUNBUFFERED": "1",
        **ONE_CELL_A_WORKFLOW,
    }
    with output.open("wb") as sink:
        command = subprocess.Popen(
            [sys.executable, "-m", "bot", *run_args(repo)], env=env, stdout=sink, stderr=sink
        )
    started: set[Proc] = set()
    try:
        deadline = time.monotonic() + 300
        while "evalbot worker: serving" not in read(data / "workers" / "2.log"):
            assert command.poll() is None, output.read_text()
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.2)
        started = descendants(command.pid, processes())
        extra = {p for p in started if "--parent-pid" in p.cmdline}
        assert len(extra) == 1, started
        command.kill()
        command.wait()
        deadline = time.monotonic() + 90  # the grace (5 s), then the worker's own stop
        while {p.pid for p in extra} & set(processes()):  # by pid: its parent pid changed
            assert time.monotonic() < deadline, read(data / "workers" / "2.log")
            time.sleep(0.5)
        deadline = time.monotonic() + 60  # the dev server got SIGTERM with the command: it stops
        while residue := {p.pid for p in left_behind(started, data)} & set(processes()):
            assert time.monotonic() < deadline, f"still running: {residue}"
            time.sleep(0.5)
        log = read(data / "workers" / "2.log")
        assert f"process {command.pid}, which started this worker, is gone" in log
        assert STORED.search(log) is not None, log
    finally:
        kill_leftovers(command, started, data)


def read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
