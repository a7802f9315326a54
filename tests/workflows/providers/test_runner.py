"""The runner on its own, outside any sandbox: edge cases of the state contract. Each behaviour is
checked for both forms: `runner.py` (as the `process` provider runs it) and the native program
the `local` provider compiles from `runner.c` (native_runner.py), so the two cannot drift apart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workflows.providers.common import runner

pytestmark = pytest.mark.timeout(60)

RUNNER = Path(runner.__file__)


@pytest.fixture(params=["python", "native"])
def runner_argv(request: pytest.FixtureRequest) -> list[str]:
    """How the runner is started: its argv before the options."""
    if request.param == "python":
        return [sys.executable, "-I", "-S", str(RUNNER)]
    return [str(request.getfixturevalue("native_programs")[0])]


def run(
    runner_argv: list[str], out: Path, command: str, *extra: str, timeout: float = 10
) -> dict[str, Any]:
    argv = [*runner_argv, "--out", str(out), "--cwd", str(out)]
    argv += ["--timeout", str(timeout), "--log-limit", "1000", *extra, "--", command]
    done = subprocess.run(argv, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return dict(json.loads((out / ".state.json").read_text()))


@pytest.mark.parametrize(
    "options",
    [
        ["--out", "OUT", "--", "true"],  # no --cwd
        ["--out", "OUT", "--cwd", "/", "--timeout", "soon", "--", "true"],
        ["--out", "OUT", "--cwd", "/", "--log-limit", "1.5", "--", "true"],
        ["--out", "OUT", "--cwd", "/", "--colour", "red", "--", "true"],
        ["--out", "OUT", "--cwd", "/", "--", "true", "false"],  # one command only
        ["--out", "OUT", "--cwd", "/", "true"],  # no --
        ["--out", "OUT", "--cwd", "/", "--timeout"],  # a flag without its value
    ],
)
def test_bad_arguments_are_refused_with_usage(
    tmp_path: Path, runner_argv: list[str], options: list[str]
) -> None:
    argv = [*runner_argv, *(str(tmp_path) if part == "OUT" else part for part in options)]
    done = subprocess.run(argv, capture_output=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.startswith(b"usage: runner.py --out DIR")
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("user", ["nobody", "100000", "1:-1", ":", "1:", ":1"])
def test_a_user_that_is_not_uid_colon_gid_is_refused_before_anything_runs(
    tmp_path: Path, runner_argv: list[str], user: str
) -> None:
    argv = [*runner_argv, "--out", str(tmp_path), "--cwd", "/"]
    argv += ["--timeout", "5", "--log-limit", "100", "--user", user, "--", "touch ran"]
    done = subprocess.run(argv, capture_output=True, timeout=30, cwd=tmp_path)
    assert done.returncode != 0 and b"usage: runner.py" in done.stderr
    assert sorted(os.listdir(tmp_path)) == []  # no state, no logs, no agent


@pytest.fixture
def readable_runner(runner_argv: list[str]) -> Iterator[list[str]]:
    """The runner's argv with a copy of it that the user nobody can read (and run: the native
    one), since a clone may be root's alone."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        copy = Path(shutil.copy(runner_argv[-1], folder))
        copy.chmod(0o644 if copy.suffix == ".py" else 0o755)
        python = ["/usr/bin/python3", "-I", "-S"] if copy.suffix == ".py" else []
        yield [*python, str(copy)]


def as_nobody(*setpriv_options: str) -> list[str]:
    """The prefix that runs a command as nobody (and what else `setpriv_options` drop); nothing
    when the tests are not root (they already hold no privilege)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *setpriv_options]


def test_a_user_it_cannot_become_stops_it_before_the_agent_runs(
    tmp_path: Path, readable_runner: list[str]
) -> None:
    """Fails closed: a drop that cannot be done (here: by a process that is not root) is an exit
    with the reason, and the agent never starts."""
    argv = [*as_nobody(), *readable_runner]
    argv += ["--out", str(tmp_path), "--cwd", "/", "--timeout", "5", "--log-limit", "100"]
    done = subprocess.run(
        [*argv, "--user", "1:1", "--", "touch ran"], capture_output=True, timeout=30
    )
    refusal = b"runner: could not drop capability 0 from the bounding set\n"  # no CAP_SETPCAP
    assert (done.returncode, done.stderr) == (70, refusal)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv must be able to drop to nobody")
@pytest.mark.parametrize(
    ("kept", "gid", "left"),
    [
        ((), 65534, b""),  # everything dropped, as the runner drops it: the check passes
        (("--inh-caps=-all", "--no-new-privs"), 65534, b"CapBnd"),  # the bounding set kept
        (("--inh-caps=-all", "--bounding-set=-all"), 65534, b"NoNewPrivs"),
        ((), 65533, b"Gid"),  # a gid other than the sandbox's
    ],
)
def test_the_check_after_the_drop_names_what_is_left(
    kept: tuple[str, ...], gid: int, left: bytes
) -> None:
    """`check_dropped` on its own, in a process setpriv dropped to nobody with one part of the
    drop left out each time: it passes only when nothing is left, and names what is. (A kept
    inheritable set cannot be made this way; the hostile test of the `local` provider sees it.)
    Python's only: the native runner's check has no entry point of its own."""
    full = ("--inh-caps=-all", "--bounding-set=-all", "--no-new-privs")
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)
        Path(shutil.copy(RUNNER, folder)).chmod(0o644)
        check = f"import sys; sys.path.insert(0, {folder!r}); import runner; "
        check += f"runner.check_dropped(65534, {gid}); print('clean')"
        argv = [*as_nobody(*(kept or full)), "/usr/bin/python3", "-I", "-S", "-c", check]
        done = subprocess.run(argv, capture_output=True, timeout=30)
    if not left:
        assert (done.returncode, done.stdout) == (0, b"clean\n"), done.stderr
    else:
        assert done.returncode != 0
        assert b"privileges left after dropping them: " + left + b"\n" in done.stderr


def test_a_missing_working_folder_is_exit_127(tmp_path: Path, runner_argv: list[str]) -> None:
    argv = [*runner_argv, "--out", str(tmp_path), "--cwd", str(tmp_path / "gone")]
    argv += ["--timeout", "5", "--log-limit", "100", "--", "true"]
    subprocess.run(argv, check=True, timeout=30)
    state = json.loads((tmp_path / ".state.json").read_text())
    assert (state["status"], state["exit_code"]) == ("finished", 127)
    assert b"cannot start the agent" in (tmp_path / "stderr.log").read_bytes()


def test_planted_symlinks_are_replaced_not_followed(tmp_path: Path, runner_argv: list[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("stdout.log", "stderr.log", ".runner-reserve", ".state.json"):
        (out / name).symlink_to(victim)
    state = run(runner_argv, out, "echo overwritten; echo overwritten >&2")
    assert state["exit_code"] == 0
    assert victim.read_text() == "precious"
    assert (out / "stdout.log").read_text() == "overwritten\n"
    assert not (out / "stdout.log").is_symlink()


def test_ready_fd_is_told_after_the_running_state_exists(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    read_end, write_end = os.pipe()
    argv = [*runner_argv, "--out", str(tmp_path), "--cwd", "/"]
    argv += ["--timeout", "5", "--log-limit", "100", "--ready-fd", str(write_end)]
    process = subprocess.Popen([*argv, "--", "sleep 0.5"], pass_fds=[write_end])
    os.close(write_end)
    try:
        assert os.read(read_end, 16) == b"ready\n"
        state = json.loads((tmp_path / ".state.json").read_text())
        assert state["status"] == "running"
        assert os.read(read_end, 16) == b""  # closed: the agent did not inherit it
    finally:
        os.close(read_end)
        process.wait(timeout=10)


def test_sigterm_stops_the_agent_as_killed(tmp_path: Path, runner_argv: list[str]) -> None:
    argv = [*runner_argv, "--out", str(tmp_path), "--cwd", "/"]
    argv += ["--timeout", "30", "--log-limit", "100", "--", "sleep 30"]
    process = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while not (tmp_path / ".state.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0
    state = json.loads((tmp_path / ".state.json").read_text())
    assert (state["termination"], state["signal"]) == ("killed", 9)
    assert not (tmp_path / ".runner-reserve").exists()


def test_an_agent_that_closes_its_output_early_is_still_followed(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    state = run(runner_argv, tmp_path, "exec >&- 2>&-; sleep 0.3; exit 4")
    assert (state["exit_code"], state["termination"]) == (4, None)
    assert state["finished_at"] - state["started_at"] >= 0.3


def test_an_agent_that_exits_leaves_its_code_its_logs_and_no_reserve(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    state = run(runner_argv, tmp_path, "echo out; echo err >&2; exit 3")
    assert (state["status"], state["exit_code"], state["signal"]) == ("finished", 3, None)
    assert (state["termination"], state["disk_full"]) == (None, False)
    assert state["pid"] > 0 and state["finished_at"] >= state["started_at"] > 0
    assert set(state["rusage"]) == {"cpu_seconds", "max_rss_mb"}
    assert state["rusage"]["max_rss_mb"] > 0
    assert (tmp_path / "stdout.log").read_bytes() == b"out\n"
    assert (tmp_path / "stderr.log").read_bytes() == b"err\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".state.json", "stderr.log", "stdout.log"]


def test_output_past_the_cap_is_dropped_and_stops_the_agent(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    state = run(runner_argv, tmp_path, "echo out; head -c 200000 /dev/zero; sleep 30")
    assert (state["termination"], state["exit_code"], state["signal"]) == ("output_limit", None, 9)
    assert (tmp_path / "stdout.log").read_bytes() == b"out\n" + bytes(1000 - 4)  # capped at 1000


def test_an_agent_killed_by_a_signal_has_no_exit_code(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    state = run(runner_argv, tmp_path, "kill -9 $$")
    assert (state["exit_code"], state["signal"], state["termination"]) == (None, 9, None)


def test_the_wall_timeout_kills_the_agent(tmp_path: Path, runner_argv: list[str]) -> None:
    began = time.monotonic()
    state = run(runner_argv, tmp_path, "sleep 30", timeout=0.5)
    assert (state["termination"], state["signal"]) == ("timeout", 9)
    assert time.monotonic() - began < 10


def test_what_the_agent_left_running_is_killed_before_it_finishes(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    """Outside a pid namespace: a daemon in a session of its own (out of the agent's process
    group) is found through /proc as a descendant of the runner, the subreaper, and killed."""
    daemon = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 30' </dev/null >/dev/null 2>&1 &"
    state = run(runner_argv, tmp_path, f"{daemon} sleep 0.3; exit 0")
    assert (state["exit_code"], state["termination"]) == (0, None)
    daemon_pid = int((tmp_path / "daemon.pid").read_text())
    assert not Path(f"/proc/{daemon_pid}").exists()  # killed and reaped


PRCTL_PROBE = """
import ctypes, importlib.util, sys
if sys.argv[2] == "without-call-function":
    import _ctypes
    del _ctypes.call_function  # a Python that lacks the private helper
spec = importlib.util.spec_from_file_location("runner", sys.argv[1])
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
assert runner.prctl(runner.PR_SET_DUMPABLE, 0)
print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
"""


@pytest.mark.parametrize("python", [sys.executable, "/usr/bin/python3"])
@pytest.mark.parametrize("way", ["with-call-function", "without-call-function"])
def test_prctl_makes_the_runner_undumpable(python: str, way: str) -> None:
    """The runner's prctl (through `_ctypes`, or `ctypes` where that is missing) takes effect in
    the sandbox interpreter and the worker's; a no-op would leave the runner traceable."""
    if not Path(python).exists():
        pytest.skip(f"no {python} here")
    done = subprocess.run(
        [python, "-I", "-S", "-c", PRCTL_PROBE, str(RUNNER), way], capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"0\n"


def test_a_runner_that_cannot_write_its_logs_says_so_and_exits_70(
    tmp_path: Path, runner_argv: list[str]
) -> None:
    argv = [*runner_argv, "--out", str(tmp_path / "gone")]
    argv += ["--cwd", str(tmp_path), "--timeout", "5", "--log-limit", "100", "--", "true"]
    done = subprocess.run(argv, capture_output=True, timeout=30)
    assert done.returncode == 70
    assert done.stderr.startswith(b"runner: ")


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.dictionaries(st.text(), children, max_size=4),
    max_leaves=10,
))  # fmt: skip
def test_state_encoder_writes_json(value: Any) -> None:
    assert json.loads(runner.to_json(value)) == value
