"""The in-sandbox runner: starts the agent, enforces its limits and keeps `.state.json`.

Standard library only: it runs inside sandboxes with Debian's /usr/bin/python3, and on the host for
the `process` provider. Every path comes from the command line, so both work:

    python3 -I -S runner.py --out /out --cwd /repo --timeout 1800 --log-limit 16777216 \
        [--fsize BYTES] [--ready-fd N] [--pid-namespace] -- 'agent command'

The runner runs the command with `/bin/sh -c` in its own session, with stdout and stderr piped into
`<out>/stdout.log` and `<out>/stderr.log`, each capped at `--log-limit` bytes (exceeding a cap kills
the agent: termination "output_limit"). It kills the agent and everything it started when the wall
timeout passes ("timeout") or when the runner gets SIGTERM/SIGINT/SIGHUP ("killed"), and once the
agent's main process exits it kills whatever the agent left behind. It never loses track of a
descendant: as pid 1 of a pid namespace (`--pid-namespace`, the `local` provider) orphans are
re-parented to it and `kill(-1)` reaches every process in the namespace; elsewhere it makes itself a
child subreaper and kills descendants found through /proc.

State (see workflows/providers/base.py), rewritten atomically: "running" right after the agent
started, then "finished" exactly once, after the agent and all its descendants are gone. The
finished state also carries "rusage" (CPU seconds and peak RSS of the agent's processes) and
"disk_full" (the disk holding `--out` had next to no free space at some point of the run: sampled
every 0.1 s). While the agent runs, `<out>/.runner-reserve` (1 MiB) keeps room for the final state
in case the agent fills the disk; it is deleted before the final state is written. When
`--ready-fd` is given, "ready" is written to it once the running state is on disk.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

STATE_FILE = ".state.json"
LOGS = ("stdout.log", "stderr.log")
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
AGENT_OOM_SCORE_ADJ = 500  # make the kernel's OOM killer prefer the agent over the runner
CHUNK = 1 << 16
STREAM_GRACE_S = 2.0  # how long to wait for pipes held by processes outside our reach
RESERVE = ".runner-reserve"
RESERVE_BYTES = 1 << 20
DISK_FULL_BYTES = 2 << 20  # free space below this (or 1 % of the disk) counts as "full":
# ext4 refuses writes with about 1 MiB still free (its delayed-allocation watermark)
DISK_SAMPLE_S = 0.1


@dataclass
class Options:
    out: str
    cwd: str
    timeout: float
    log_limit: int
    fsize: int
    ready_fd: int
    pid_namespace: bool
    command: str


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(prog="runner", description="Run an agent command.")
    parser.add_argument("--out", required=True, help="folder for logs and the state file")
    parser.add_argument("--cwd", required=True, help="working directory of the agent")
    parser.add_argument("--timeout", type=float, required=True, help="wall timeout, seconds")
    parser.add_argument("--log-limit", type=int, required=True, help="cap per log, bytes")
    parser.add_argument("--fsize", type=int, default=0, help="RLIMIT_FSIZE for the agent")
    parser.add_argument("--ready-fd", type=int, default=-1, help="fd told 'ready' when running")
    parser.add_argument("--pid-namespace", action="store_true", help="we are pid 1 of our own")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- shell command")
    args = parser.parse_args(argv)
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    if len(words) != 1:
        parser.error("give exactly one shell command after --")
    return Options(
        out=args.out,
        cwd=args.cwd,
        timeout=args.timeout,
        log_limit=args.log_limit,
        fsize=args.fsize,
        ready_fd=args.ready_fd,
        pid_namespace=args.pid_namespace and os.getpid() == 1,
        command=words[0],
    )


# -- state file ----------------------------------------------------------------------------------


def write_state(out: str, state: dict[str, Any]) -> None:
    """Write + rename; on a full disk, give up the reserve and try once more."""
    try:
        _write_state(out, state)
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        release_reserve(out)
        _write_state(out, state)


def _write_state(out: str, state: dict[str, Any]) -> None:
    """Refuses to follow anything the agent planted at the temporary name."""
    data = json.dumps(state).encode()
    tmp = os.path.join(out, f"{STATE_FILE}.tmp-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(out, STATE_FILE))


def make_reserve(out: str) -> None:
    """Set aside room for the state file: the agent may fill the disk it shares with us."""
    path = os.path.join(out, RESERVE)
    with contextlib.suppress(OSError):
        os.unlink(path)
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError:
        with contextlib.suppress(OSError):
            os.write(fd, bytes(RESERVE_BYTES))
    finally:
        os.close(fd)


def release_reserve(out: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(out, RESERVE))


def disk_nearly_full(out: str) -> bool:
    try:
        stats = os.statvfs(out)
    except OSError:
        return False
    floor = max(DISK_FULL_BYTES, stats.f_blocks * stats.f_frsize // 100)
    return stats.f_bavail * stats.f_frsize < floor


def open_log(out: str, name: str) -> BinaryIO:
    path = os.path.join(out, name)
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        os.unlink(path)  # never write through a symlink or into a file someone else holds
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o644), "wb", buffering=0)


# -- process control -----------------------------------------------------------------------------


def prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def agent_preexec(fsize: int) -> Callable[[], None]:
    """Runs in the forked child before exec (the runner is single-threaded, so this is safe)."""

    def setup() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if fsize > 0:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as handle:
            handle.write(str(AGENT_OOM_SCORE_ADJ))

    return setup


def children_of(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc (used when we are not a namespace's pid 1)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields and fields[0] != b"Z":
            parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_everything(agent_pid: int, pid_namespace: bool) -> None:
    """SIGKILL every process the agent started (but not the runner)."""
    if pid_namespace:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # pid 1 is spared: that is us
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(agent_pid, signal.SIGKILL)
    for _ in range(50):  # descendants may fork while we kill; repeat until none are left
        victims = children_of(os.getpid())
        if not victims:
            return
        for victim in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(victim, signal.SIGKILL)


# -- supervision ---------------------------------------------------------------------------------


@dataclass
class Supervision:
    agent_pid: int
    logs: dict[int, BinaryIO]  # read end of a pipe -> its capped log file
    log_limit: int
    deadline: float
    pid_namespace: bool
    written: dict[int, int] = field(default_factory=dict)
    status: int | None = None  # wait status of the agent's main process
    termination: str | None = None
    stop_requested: bool = False
    no_children: bool = False
    streams_deadline: float | None = None
    out: str = ""
    disk_full: bool = False
    next_disk_sample: float = 0.0

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.no_children = True
                return
            if pid == 0:
                return
            if pid == self.agent_pid:
                self.status = status

    def pump(self, fd: int) -> None:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.close_stream(fd)
            return
        room = max(self.log_limit - self.written.get(fd, 0), 0)
        if room:
            self.written[fd] = self.written.get(fd, 0) + min(len(data), room)
            try:
                self.logs[fd].write(data[:room])
            except OSError:  # e.g. the agent filled the disk: keep draining, drop the text
                self.disk_full = self.disk_full or disk_nearly_full(self.out)
        if len(data) > room and self.termination is None:
            self.termination = "output_limit"

    def close_stream(self, fd: int) -> None:
        self.logs.pop(fd).close()
        os.close(fd)

    def decide(self) -> None:
        """Turn a stop request or an expired deadline into a termination reason."""
        if self.termination is not None or self.status is not None:
            return
        if self.stop_requested:
            self.termination = "killed"
        elif time.monotonic() >= self.deadline:
            self.termination = "timeout"

    def sample_disk(self) -> None:
        now = time.monotonic()
        if now >= self.next_disk_sample:
            self.next_disk_sample = now + DISK_SAMPLE_S
            self.disk_full = self.disk_full or disk_nearly_full(self.out)

    def winding_down(self) -> bool:
        return self.termination is not None or self.status is not None

    def done(self) -> bool:
        return self.status is not None and self.no_children and not self.logs


def supervise(run: Supervision, wakeup: int) -> None:
    while True:
        run.reap()
        run.decide()
        if run.winding_down() and not run.no_children:
            kill_everything(run.agent_pid, run.pid_namespace)
        if run.no_children and run.logs:
            drain_orphaned_streams(run)
        run.sample_disk()
        if run.done():
            return
        wait_s = 0.05 if run.winding_down() else min(DISK_SAMPLE_S, run.deadline - time.monotonic())
        readable, _, _ = select.select([*run.logs, wakeup], [], [], max(wait_s, 0.0))
        for fd in readable:
            if fd == wakeup:
                with contextlib.suppress(BlockingIOError):
                    os.read(wakeup, 512)
            elif fd in run.logs:
                run.pump(fd)


def drain_orphaned_streams(run: Supervision) -> None:
    """Every process is gone, yet a pipe is open (passed to a process outside our reach)."""
    now = time.monotonic()
    if run.streams_deadline is None:
        run.streams_deadline = now + STREAM_GRACE_S
    if now >= run.streams_deadline:
        for fd in list(run.logs):
            run.close_stream(fd)


def spawn(options: Options, stdout: int, stderr: int) -> int:
    agent = subprocess.Popen(  # noqa: S602 - running the agent's shell command is the point
        options.command,
        shell=True,
        executable="/bin/sh",
        cwd=options.cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=agent_preexec(options.fsize),
    )
    agent.returncode = 0  # we reap it ourselves (waitpid(-1)); keep Popen from trying later
    return agent.pid


def finished_state(base: dict[str, Any], run: Supervision) -> dict[str, Any]:
    status = run.status if run.status is not None else 0
    exited = os.WIFEXITED(status)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        **base,
        "status": "finished",
        "finished_at": time.time(),
        "exit_code": os.WEXITSTATUS(status) if exited else None,
        "signal": None if exited else os.WTERMSIG(status),
        "termination": run.termination,
        "disk_full": run.disk_full,
        "rusage": {
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "max_rss_mb": round(usage.ru_maxrss / 1024, 1),
        },
    }


def notify_ready(fd: int) -> None:
    if fd < 0:
        return
    with contextlib.suppress(OSError):
        os.write(fd, b"ready\n")
    with contextlib.suppress(OSError):
        os.close(fd)


def install_signals(holder: list[Supervision]) -> int:
    """SIGCHLD wakes the select loop; SIGTERM/SIGINT/SIGHUP ask for a clean stop."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def on_stop(signum: int, frame: object) -> None:
        for run in holder:
            run.stop_requested = True

    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_stop)
    return read_end


def failed_to_start(options: Options, error: OSError) -> int:
    release_reserve(options.out)
    with contextlib.suppress(OSError), open_log(options.out, LOGS[1]) as log:
        log.write(f"runner: cannot start the agent: {error.strerror or error}\n".encode())
    now = time.time()
    state = {"status": "finished", "pid": 0, "started_at": now, "finished_at": now}
    write_state(options.out, {**state, "exit_code": 127, "signal": None, "termination": None})
    notify_ready(options.ready_fd)
    return 0


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    holder: list[Supervision] = []
    wakeup = install_signals(holder)
    if not options.pid_namespace:
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_DUMPABLE, 0)  # the agent (same uid) may not ptrace the runner
    logs = [open_log(options.out, name) for name in LOGS]
    make_reserve(options.out)
    pipes = [os.pipe2(os.O_CLOEXEC) for _ in LOGS]
    try:
        agent_pid = spawn(options, pipes[0][1], pipes[1][1])
    except OSError as error:
        return failed_to_start(options, error)
    finally:
        for _, write_end in pipes:
            os.close(write_end)
    run = Supervision(
        agent_pid=agent_pid,
        logs={pipes[0][0]: logs[0], pipes[1][0]: logs[1]},
        log_limit=options.log_limit,
        deadline=time.monotonic() + options.timeout,
        pid_namespace=options.pid_namespace,
        out=options.out,
    )
    holder.append(run)
    for fd in run.logs:
        os.set_blocking(fd, False)
    base = {"status": "running", "pid": agent_pid, "started_at": time.time(), "finished_at": None}
    write_state(options.out, {**base, "exit_code": None, "signal": None, "termination": None})
    notify_ready(options.ready_fd)
    supervise(run, wakeup)
    final = finished_state(base, run)
    release_reserve(options.out)
    write_state(options.out, final)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as failure:
        print(f"runner: {failure.strerror or failure}", file=sys.stderr)
        sys.exit(70 if failure.errno != errno.ENOSPC else 71)
