"""The process provider's runner spawner (workflows/providers/spawner.py) on its own: runners it
forks behave like runners started by a fresh interpreter, outlive it, and a dead spawner is
replaced."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from workflows.providers.base import SandboxError
from workflows.providers.common.folder import read_state
from workflows.providers.common.launch import wait_ready
from workflows.providers.common.procs import is_alive, start_time
from workflows.providers.spawner import RunnerSpawner

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def spawner() -> AsyncIterator[RunnerSpawner]:
    spawner = RunnerSpawner(sys.executable)
    yield spawner
    spawner.close()


async def start(
    spawner: RunnerSpawner, out: Path, command: str, env: dict[str, str] | None = None
) -> int:
    """Spawn a runner for `command` and wait until it says it is ready; its pid."""
    out.mkdir(parents=True, exist_ok=True)
    argv = ["--out", str(out), "--cwd", str(out), "--timeout", "20", "--log-limit", "10000"]
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    try:
        pid = await spawner.spawn(
            [*argv, "--", command], env=env or {"PATH": "/usr/bin:/bin"},
            log=out.parent / f"{out.name}.log", ready_fd=write_fd,
        )  # fmt: skip
    finally:
        os.close(write_fd)
    assert await wait_ready(read_fd, 10)
    return pid


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


async def exited(pid: int) -> None:
    """Until `pid` is a zombie or gone (its sockets are closed by then). By pid and start time:
    with this VM's pid_max of 32768 and parallel tests forking hard, a pid may be reused while we
    wait, and the new process must not be waited for."""
    started = start_time(pid)
    for _ in range(200):
        if started is None or not is_alive(pid, started):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"process {pid} did not exit")


async def finished(out: Path) -> dict[str, Any]:
    for _ in range(200):
        state = read_state(out)
        if state is not None and state["status"] == "finished":
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"no finished state in {out}")


async def test_a_spawned_runner_runs_the_command_with_its_environment_detached(
    spawner: RunnerSpawner, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "GREETING": "hello from the request"}
    pid = await start(spawner, out, 'echo "$GREETING"; pwd; sleep 0.5; exit 3', env)
    assert os.getsid(pid) == pid  # detached: a session of its own, not the worker's child
    assert parent_of(pid) not in (os.getpid(), os.getppid())

    state = await finished(out)
    assert (state["exit_code"], state["termination"]) == (3, None)
    assert (out / "stdout.log").read_text() == f"hello from the request\n{out}\n"
    assert "GREETING" not in os.environ  # the request's environment is the runner's alone


async def test_runners_outlive_a_killed_spawner_and_the_next_request_gets_a_new_one(
    spawner: RunnerSpawner, tmp_path: Path
) -> None:
    first = await start(spawner, tmp_path / "first", "sleep 1; echo survived")
    old_spawner = spawner.pid
    assert old_spawner is not None
    os.kill(old_spawner, signal.SIGKILL)
    await exited(old_spawner)

    second = await start(spawner, tmp_path / "second", "echo second")

    assert spawner.pid not in (None, old_spawner)
    assert (await finished(tmp_path / "first"))["exit_code"] == 0
    assert (tmp_path / "first" / "stdout.log").read_text() == "survived\n"
    assert (await finished(tmp_path / "second"))["exit_code"] == 0
    assert first != second


async def test_a_runner_that_cannot_be_started_is_a_clear_error(
    spawner: RunnerSpawner, tmp_path: Path
) -> None:
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    with pytest.raises(SandboxError, match="could not launch the runner: No such file"):
        await spawner.spawn(
            ["--out", str(tmp_path), "--", "true"],
            env={},
            log=tmp_path / "missing-folder" / "runner.log",
            ready_fd=write_fd,
        )
    os.close(write_fd)
    os.close(read_fd)
    assert await start(spawner, tmp_path / "after", "true") > 0  # the spawner is still serving


async def test_a_malformed_request_is_logged_by_the_forked_runner(
    spawner: RunnerSpawner, tmp_path: Path
) -> None:
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    log = tmp_path / "runner.log"
    await spawner.spawn(["--no-such-flag"], env={}, log=log, ready_fd=write_fd)
    os.close(write_fd)
    assert not await wait_ready(read_fd, 10)  # it exited without saying ready
    assert "usage: runner.py" in log.read_text()


async def test_the_spawner_exits_when_its_worker_closes_the_channel(
    spawner: RunnerSpawner, tmp_path: Path
) -> None:
    await start(spawner, tmp_path / "out", "true")
    pid = spawner.pid
    assert pid is not None and is_alive(pid, start_time(pid) or 0)
    spawner.close()
    assert not is_alive(pid, start_time(pid) or 0)


@pytest.fixture(params=["fork", "launcher"])
async def exec_spawner(request: pytest.FixtureRequest) -> AsyncIterator[RunnerSpawner]:
    """A spawner that carries out exec requests by forking itself, or with the launcher."""
    spawner = RunnerSpawner(sys.executable)
    if request.param == "launcher":
        spawner.launcher = request.getfixturevalue("native_programs")[1]
    yield spawner
    spawner.close()


async def test_an_executed_command_gets_its_fds_at_their_numbers_and_joins_its_groups_first(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    """`spawn_exec` (the `local` provider's bubblewrap): the attached descriptors are open at the
    numbers the command names, whichever numbers they arrive at in the spawner (two numbers
    swapped on purpose), and the child wrote its pid into each "cgroup.procs" before the exec
    (regular files stand in for the groups here: what matters is who wrote, and when)."""
    procs = [tmp_path / "memory.procs", tmp_path / "pids.procs"]
    for path in procs:
        path.touch()
    first_r, first_w = os.pipe2(os.O_CLOEXEC)
    second_r, second_w = os.pipe2(os.O_CLOEXEC)
    swapped = [second_w, first_w]  # they arrive at other numbers in the spawner
    joined = tmp_path / "joined"
    script = (
        f"import os; os.write({second_w}, b'one'); os.write({first_w}, b'two'); "
        f"groups = [open(p).read() for p in {[str(p) for p in procs]}]; "
        f"open({str(joined)!r}, 'w').write(' '.join([*groups, str(os.getpid())])); "
        f"fds = [f'/proc/self/fd/{{n}}' for n in os.listdir('/proc/self/fd')]; "
        f"links = [os.readlink(f) for f in fds if os.path.lexists(f)]; "
        f"open({str(tmp_path / 'pipes')!r}, 'w').write(' '.join(sorted(links)))"
    )
    try:
        pid = await exec_spawner.spawn_exec(
            [sys.executable, "-c", script], env={}, log=tmp_path / "log",
            cgroup_procs=procs, pass_fds=swapped,
        )  # fmt: skip
        await exited(pid)
    finally:
        os.close(first_w)
        os.close(second_w)
    assert os.read(first_r, 100) == b"two" and os.read(second_r, 100) == b"one"
    os.close(first_r)
    os.close(second_r)
    assert joined.read_text().split() == [str(pid)] * 3  # the exec kept the pid
    pipes = [link for link in (tmp_path / "pipes").read_text().split() if "pipe:" in link]
    assert len(pipes) == len(set(pipes)) == 2  # each once: no copy left where it arrived
    assert (tmp_path / "log").read_text() == ""


async def test_an_exec_that_cannot_join_its_groups_never_runs_and_says_why(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    pid = await exec_spawner.spawn_exec(
        ["touch", str(marker)], env={"PATH": "/usr/bin:/bin"}, log=tmp_path / "log",
        cgroup_procs=[tmp_path / "no-such-group" / "cgroup.procs"],
    )  # fmt: skip
    await exited(pid)
    assert not marker.exists()
    assert "no-such-group/cgroup.procs" in (tmp_path / "log").read_text()


async def test_started_gets_the_pid_in_the_asking_thread_before_the_call_returns_and_only_then(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    """What a sandbox records its runner with, without a hop of its own: called once, with the
    pid the call returns, not on the event loop's thread; never for a request refused."""
    calls: list[tuple[int, str]] = []

    def started(pid: int) -> None:
        calls.append((pid, threading.current_thread().name))

    pid = await exec_spawner.spawn_exec(["true"], env={}, log=tmp_path / "log", started=started)
    assert calls == [(pid, calls[0][1])] and calls[0][1] != threading.current_thread().name
    await exited(pid)
    with pytest.raises(SandboxError):
        await exec_spawner.spawn_exec(
            ["true"], env={}, log=tmp_path / "log", pass_fds=[0], started=started
        )
    assert len(calls) == 1


async def test_an_exec_request_with_descriptors_below_3_is_refused(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    with pytest.raises(SandboxError, match="none below 3"):  # stdin: it would replace the child's
        await exec_spawner.spawn_exec(["true"], env={}, log=tmp_path / "log", pass_fds=[0])


async def test_an_executed_command_is_detached_with_only_its_own_descriptors(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    """Own session, cwd /, stdin /dev/null, output appended to the log (kept from before), no
    descriptor of the spawner's (its channel to the worker) left open, and SIGPIPE and SIGXFSZ,
    which the spawner's Python ignores, back at their defaults (read by a shell: an interpreter
    would ignore them again itself)."""
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    probe = (
        "import os; fds = sorted(int(n) for n in os.listdir('/proc/self/fd')); "
        "print(os.getsid(0) == os.getpid(), os.getcwd(), os.readlink('/proc/self/fd/0'), fds)"
    )
    for argv in (
        [sys.executable, "-I", "-S", "-c", probe],
        ["/bin/sh", "-c", "grep ^SigIgn /proc/$$/status"],
    ):
        await exited(await exec_spawner.spawn_exec(argv, env={}, log=log))
    earlier, said, ignored = log.read_text().splitlines()
    assert earlier == "earlier line"
    assert said == "True / /dev/null [0, 1, 2, 3]"  # 3: listdir's own
    assert int(ignored.split()[1], 16) & (1 << 12 | 1 << 24) == 0, ignored  # SIGPIPE, SIGXFSZ


async def test_a_launch_namespace_never_reaches_the_command(
    exec_spawner: RunnerSpawner, tmp_path: Path
) -> None:
    """A request carrying a launch namespace (launch.c; here a descriptor of a plain file, which
    setns refuses): with the launcher the command still runs, in the host's namespace, and the
    log says why; a forked child ignores it. Either way the command does not hold it."""
    plain = tmp_path / "not-a-namespace"
    held = os.open(plain, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC)
    probe = (
        "import os; fds = [f'/proc/self/fd/{n}' for n in os.listdir('/proc/self/fd')]; "
        "print([os.readlink(f) for f in fds if os.path.lexists(f)])"
    )
    try:
        pid = await exec_spawner.spawn_exec(
            [sys.executable, "-c", probe], env={}, log=tmp_path / "log",
            namespace=(held, tmp_path),
        )  # fmt: skip
        await exited(pid)
    finally:
        os.close(held)
    log = (tmp_path / "log").read_text()
    assert "/dev/null" in log  # the probe ran and listed its descriptors
    assert str(plain) not in log
    fell_back = "setns: Invalid argument; bubblewrap starts in the host's mount namespace" in log
    assert fell_back == (exec_spawner.launcher is not None)
