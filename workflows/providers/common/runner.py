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

It imports as little as it can (no subprocess, argparse, json, enum): its start-up time is paid by
every cell of an experiment.
"""

from __future__ import annotations

import _signal as signals  # type: ignore[import-not-found]  # `signal` imports enum: slow
import errno
import os
import resource
import select
import sys
import time

TYPE_CHECKING = False  # `typing` imports re: slow; mypy treats this name as always true
if TYPE_CHECKING:
    from typing import Any, BinaryIO

STATE_FILE = ".state.json"
LOGS = ("stdout.log", "stderr.log")
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
AGENT_OOM_SCORE_ADJ = 500  # make the kernel's OOM killer prefer the agent over the runner
CHUNK = 1 << 16
MAX_REQUEST_FDS = 4  # file descriptors a spawner request may attach
STREAM_GRACE_S = 2.0  # how long to wait for pipes held by processes outside our reach
RESERVE = ".runner-reserve"
RESERVE_BYTES = 1 << 20
DISK_FULL_BYTES = 2 << 20  # free space below this (or 1 % of the disk) counts as "full":
# ext4 refuses writes with about 1 MiB still free (its delayed-allocation watermark)
DISK_SAMPLE_S = 0.1
SIGKILL, SIGCHLD = 9, 17
STOP_SIGNALS = (15, 2, 1)  # SIGTERM, SIGINT, SIGHUP
IGNORED_BY_PYTHON = (13, 25)  # SIGPIPE, SIGXFSZ
RESET_SIGNALS = (*STOP_SIGNALS, SIGCHLD, *IGNORED_BY_PYTHON)
USAGE = (
    "usage: runner.py --out DIR --cwd DIR --timeout S --log-limit BYTES [--fsize BYTES] "
    "[--ready-fd N] [--pid-namespace] [--user UID:GID] -- COMMAND"
)


class Options:
    def __init__(self) -> None:
        self.out = ""
        self.cwd = ""
        self.timeout = 0.0
        self.log_limit = 0
        self.fsize = 0
        self.ready_fd = -1
        self.pid_namespace = False
        self.user = ""  # UID:GID to drop to before anything else (the `local` provider)
        self.command = ""


def parse_args(argv: list[str]) -> Options:
    options, rest = Options(), list(argv)
    fields = {"--out": "out", "--cwd": "cwd", "--timeout": "timeout", "--log-limit": "log_limit"}
    fields |= {"--fsize": "fsize", "--ready-fd": "ready_fd", "--user": "user"}
    try:
        while rest and rest[0] != "--":
            flag = rest.pop(0)
            if flag == "--pid-namespace":
                options.pid_namespace = os.getpid() == 1
                continue
            name = fields[flag]
            kind = type(getattr(options, name))
            setattr(options, name, kind(rest.pop(0)))
    except (KeyError, IndexError, ValueError):
        raise SystemExit(USAGE) from None
    if rest[:1] != ["--"] or len(rest) != 2 or not (options.out and options.cwd):
        raise SystemExit(USAGE)
    options.command = rest[1]
    return options


# -- state file ----------------------------------------------------------------------------------


def to_json(value: Any) -> str:
    """Enough JSON for the state file (dicts, strings, numbers, booleans, null)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = "".join(c if c >= " " and c not in '"\\' else f"\\u{ord(c):04x}" for c in value)
        return f'"{escaped}"'
    items = ", ".join(f"{to_json(str(key))}: {to_json(item)}" for key, item in value.items())
    return "{" + items + "}"


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
    data = to_json(state).encode()
    tmp = os.path.join(out, f"{STATE_FILE}.tmp-{os.getpid()}")
    unlink_quietly(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(out, STATE_FILE))


def unlink_quietly(path: str) -> None:
    try:  # noqa: SIM105 - contextlib costs start-up time (as do typing, enum, re)
        os.unlink(path)
    except OSError:
        pass


def make_reserve(out: str) -> None:
    """Set aside room for the state file: the agent may fill the disk it shares with us."""
    path = os.path.join(out, RESERVE)
    unlink_quietly(path)
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except OSError:
        try:  # noqa: SIM105
            os.write(fd, bytes(RESERVE_BYTES))
        except OSError:
            pass
    finally:
        os.close(fd)


def release_reserve(out: str) -> None:
    unlink_quietly(os.path.join(out, RESERVE))


def disk_nearly_full(out: str) -> bool:
    try:
        stats = os.statvfs(out)
    except OSError:
        return False
    floor = max(DISK_FULL_BYTES, stats.f_blocks * stats.f_frsize // 100)
    return stats.f_bavail * stats.f_frsize < floor


def open_log(out: str, name: str) -> BinaryIO:
    path = os.path.join(out, name)
    unlink_quietly(path)  # never write through a symlink or into a file someone else holds
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o644), "wb", buffering=0)


# -- process control -----------------------------------------------------------------------------


def prctl(option: int, value: int) -> bool:
    return libc_call("prctl", (option, value, 0, 0, 0)) == 0


LIBC_FUNCTIONS: dict[str, int] = {}  # name -> address, looked up once (the drop makes ~45 calls)


def libc_call(name: str, args: tuple[int | bytes, ...]) -> int | None:
    """A libc function through `_ctypes`, the C core of `ctypes`: importing `ctypes` itself (its
    classes, `struct`, `_endian`) cost about 2 ms of every runner's start. Its return value, or
    None when it cannot be called. bytes arguments are passed as pointers."""
    try:
        from _ctypes import call_function, dlopen, dlsym
    except ImportError:  # a Python without these private helpers: the public way
        return _libc_call_with_ctypes(name, args)
    try:
        if name not in LIBC_FUNCTIONS:  # NULL: the program and its libraries
            LIBC_FUNCTIONS[name] = dlsym(dlopen(None), name)  # type: ignore[arg-type]
        return int(call_function(LIBC_FUNCTIONS[name], args))
    except (OSError, AttributeError):
        return None


def _libc_call_with_ctypes(name: str, args: tuple[int | bytes, ...]) -> int | None:
    import ctypes

    try:
        return int(getattr(ctypes.CDLL(None), name)(*args))
    except (OSError, AttributeError):
        return None


# -- privileges (the `local` provider: `--user`) ---------------------------------------------------

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
CAP_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def drop_privileges(uid: int, gid: int) -> None:
    """Become `uid`:`gid` for good, as `setpriv --reuid --regid --clear-groups --inh-caps=-all
    --bounding-set=-all --no-new-privs` would: no new privileges, an empty bounding set, no
    ambient capabilities, no supplementary groups, every uid and gid the sandbox's (which clears
    the permitted and effective sets), then an empty inheritable set. Then it checks all of it in
    /proc/self/status and raises PermissionError if anything is left (fails closed)."""
    if not prctl(PR_SET_NO_NEW_PRIVS, 1):
        raise PermissionError("could not set no_new_privs")
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last_cap = int(handle.read())
    for cap in range(last_cap + 1):
        if not prctl(PR_CAPBSET_DROP, cap):
            raise PermissionError(f"could not drop capability {cap} from the bounding set")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)  # checked below; cleared by setresuid anyway
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    header = CAPABILITY_VERSION_3.to_bytes(4, sys.byteorder) + bytes(4)  # this process
    if libc_call("capset", (header, bytes(24))) != 0:  # two empty sets of three 32-bit masks
        raise PermissionError("could not clear the inheritable capabilities")
    check_dropped(uid, gid)


def check_dropped(uid: int, gid: int) -> None:
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle.read().splitlines() if ":" in line)
    wanted = {name: "0000000000000000" for name in CAP_FIELDS}
    wanted |= {"Uid": f"{uid}\t{uid}\t{uid}\t{uid}", "Gid": f"{gid}\t{gid}\t{gid}\t{gid}"}
    wanted |= {"Groups": "", "NoNewPrivs": "1"}
    left = [name for name, value in wanted.items() if status.get(name, "").strip() != value]
    if left:
        raise PermissionError(f"privileges left after dropping them: {', '.join(left)}")


def spawn(options: Options, stdout: int, stderr: int) -> int:
    """fork + exec `/bin/sh -c command` in its own session; OSError if the exec failed."""
    error_r, error_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: we are single-threaded, so Python code is safe here
        try:
            become_agent(options, stdout, stderr, keep=error_w)
        except OSError as failure:
            os.write(error_w, str(failure.errno or 0).encode())
        finally:
            os._exit(127)
    os.close(error_w)
    failed = os.read(error_r, 32)
    os.close(error_r)
    if failed:
        os.waitpid(pid, 0)
        code = int(failed)
        raise OSError(code, os.strerror(code))
    return pid


def become_agent(options: Options, stdout: int, stderr: int, keep: int) -> None:
    os.setsid()
    for signum in RESET_SIGNALS:
        signals.signal(signum, signals.SIG_DFL)
    signals.set_wakeup_fd(-1)
    null = os.open(os.devnull, os.O_RDONLY)
    for target, source in ((0, null), (1, stdout), (2, stderr)):
        os.dup2(source, target)
    os.closerange(3, keep)  # the ready pipe and everything else the runner holds
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    os.chdir(options.cwd)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if options.fsize > 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (options.fsize, options.fsize))
    try:
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write(str(AGENT_OOM_SCORE_ADJ))
    except OSError:
        pass
    os.execv("/bin/sh", ["sh", "-c", options.command])  # noqa: S606 - the shell is the point


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


def signal_quietly(pid: int, signum: int, group: bool = False) -> None:
    try:  # noqa: SIM105
        (os.killpg if group else os.kill)(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_everything(agent_pid: int, pid_namespace: bool) -> None:
    """SIGKILL every process the agent started (but not the runner)."""
    if pid_namespace:
        signal_quietly(-1, SIGKILL)  # everything in our pid namespace; pid 1 (us) is spared
        return
    signal_quietly(agent_pid, SIGKILL, group=True)
    for _ in range(50):  # descendants may fork while we kill; repeat until none are left
        victims = children_of(os.getpid())
        if not victims:
            return
        for victim in victims:
            signal_quietly(victim, SIGKILL)


# -- supervision ---------------------------------------------------------------------------------


class Supervision:
    def __init__(self, options: Options, agent_pid: int, logs: dict[int, BinaryIO]) -> None:
        self.agent_pid = agent_pid
        self.logs = logs  # read end of a pipe -> its capped log file
        self.log_limit = options.log_limit
        self.deadline = time.monotonic() + options.timeout
        self.pid_namespace = options.pid_namespace
        self.out = options.out
        self.written: dict[int, int] = {}
        self.status: int | None = None  # wait status of the agent's main process
        self.termination: str | None = None
        self.stop_requested = False
        self.no_children = False
        self.streams_deadline: float | None = None
        self.disk_full = False
        self.next_disk_sample = 0.0

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
                try:  # noqa: SIM105
                    os.read(wakeup, 512)
                except BlockingIOError:
                    pass
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
    try:
        os.write(fd, b"ready\n")
        os.close(fd)
    except OSError:
        pass


def install_signals(holder: list[Supervision]) -> int:
    """SIGCHLD wakes the select loop; SIGTERM/SIGINT/SIGHUP ask for a clean stop."""
    read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signals.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def on_stop(signum: int, frame: object) -> None:
        for run in holder:
            run.stop_requested = True

    signals.signal(SIGCHLD, lambda signum, frame: None)
    for signum in STOP_SIGNALS:
        signals.signal(signum, on_stop)
    return read_end


def failed_to_start(options: Options, error: OSError) -> int:
    release_reserve(options.out)
    try:
        with open_log(options.out, LOGS[1]) as log:
            log.write(f"runner: cannot start the agent: {error.strerror or error}\n".encode())
    except OSError:
        pass
    now = time.time()
    state = {"status": "finished", "pid": 0, "started_at": now, "finished_at": now}
    write_state(options.out, {**state, "exit_code": 127, "signal": None, "termination": None})
    notify_ready(options.ready_fd)
    return 0


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    if options.user:  # before anything else: nothing of the sandbox is touched as root
        uid, _, gid = options.user.partition(":")
        if not (uid.isdigit() and gid.isdigit()):
            raise SystemExit(USAGE)
        drop_privileges(int(uid), int(gid))
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
    run = Supervision(options, agent_pid, {pipes[0][0]: logs[0], pipes[1][0]: logs[1]})
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


# -- spawner mode (the process provider) -----------------------------------------------------------


def serve(channel_fd: int, launcher: str = "") -> int:
    """`--serve FD [LAUNCHER]`: fork a runner per request read from the socket FD, so a run pays
    a fork of this small, already-imported process instead of an interpreter's start-up. A request
    is JSON {"argv", "env", "log"} (read_request), with the ready pipe's write end attached; the
    reply is a line of JSON, {"pid": N} or {"error": "..."}. The runners are detached as
    `launch_detached` detaches them: their own session, cwd /, stdin /dev/null, stdout and stderr
    appended to the log. EOF (the worker is gone) ends the spawner; the runners live on. Exec
    requests (`fork_exec`) start LAUNCHER (launch.c) when given, instead of a fork of this
    process (`spawn_launched`)."""
    import json
    import socket

    channel = socket.socket(fileno=channel_fd)
    channel.set_inheritable(False)  # no started program may hold the worker's channel
    signals.signal(SIGCHLD, signals.SIG_IGN)  # the kernel reaps the runners we fork
    while True:
        try:
            message, fds = read_request(channel)
        except (OSError, EOFError):
            return 0
        reply: dict[str, int | str]
        try:
            request = json.loads(message)
            if "exec" in request and launcher:
                reply = {"pid": spawn_launched(launcher, request, fds)}
            else:
                fork = fork_exec if "exec" in request else fork_runner
                reply = {"pid": fork(request, fds, channel)}
        except (OSError, ValueError, KeyError, TypeError) as error:
            reply = {"error": getattr(error, "strerror", None) or str(error)}
        finally:
            for fd in fds:
                os.close(fd)
        channel.sendall(json.dumps(reply).encode() + b"\n")


def read_request(channel: Any) -> tuple[bytes, list[int]]:
    """A 4-byte big-endian length, then that many bytes; the file descriptors ride on the first
    bytes. EOFError when the worker closed its end."""
    import socket

    header, fds, _, _ = socket.recv_fds(channel, 4, MAX_REQUEST_FDS)
    while 0 < len(header) < 4:
        header += channel.recv(4 - len(header))
    if len(header) < 4:
        raise EOFError
    size, chunks = int.from_bytes(header, "big"), []
    while size > 0:
        chunk = channel.recv(min(size, CHUNK))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks), fds


def fork_runner(request: dict[str, Any], fds: list[int], channel: Any) -> int:
    if len(fds) != 1:
        raise ValueError("a request carries exactly one file descriptor, the ready pipe")
    argv = ["--ready-fd", str(fds[0]), *request["argv"]]
    env = request_env(request)
    pid, log = fork_logging(request["log"])
    if pid:
        return pid
    code = 70
    try:  # the child: the spawner is single-threaded, so Python code is safe here
        channel.close()
        code = run_detached(argv, env, log)
    except SystemExit as stop:  # parse_args refused the request's argv
        print(f"runner: {stop.code}", file=sys.stderr)
    except BaseException as error:
        print(f"runner: {error!r}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(code)


def request_env(request: dict[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in request["env"].items()}


def fork_logging(log_path: str) -> tuple[int, int]:
    """fork, with `log_path` opened for appending first: (the child's pid, -1) in the spawner,
    (0, the log's descriptor) in the child."""
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        pid = os.fork()
    except OSError:
        os.close(log)
        raise
    if pid:
        os.close(log)
        return pid, -1
    return 0, log


def run_detached(argv: list[str], env: dict[str, str], log: int) -> int:
    detach(log)
    os.environ.clear()
    os.environ.update(env)
    return run_main(argv)


def detach(log: int) -> None:
    """Own session, SIGCHLD as usual, cwd /, stdin /dev/null, stdout and stderr into `log`."""
    os.setsid()
    signals.signal(SIGCHLD, signals.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    for target, source in ((0, null), (1, log), (2, log)):
        os.dup2(source, target)
    os.close(null)
    os.close(log)
    os.chdir("/")


def exec_request(request: dict[str, Any], fds: list[int]) -> tuple[list[str], list[int]]:
    """An exec request's argv and the numbers its attached descriptors go to; ValueError if it
    does not attach one descriptor per number, or names one below 3."""
    argv, targets = [str(a) for a in request["exec"]], [int(n) for n in request["fds"]]
    if len(fds) != len(targets) or not argv or min(targets, default=3) < 3:
        raise ValueError("a request attaches one file descriptor per number in fds, none below 3")
    return argv, targets


def carried_namespace(
    request: dict[str, Any], fds: list[int], key: str
) -> tuple[list[int], int | None]:
    """An exec request naming `key` carries that namespace's descriptor after the others: the
    network namespace the command starts in ("network", network_pool.py), then the launch mount
    namespace ("attach", launch.c), taken in that order from the end. (The others, it), made
    close-on-exec first so that no command inherits it."""
    if not request.get(key):
        return fds, None
    if not fds:
        raise ValueError(f"a request naming {key} carries its namespace")
    os.set_inheritable(fds[-1], False)
    return fds[:-1], fds[-1]


def spawn_launched(launcher: str, request: dict[str, Any], fds: list[int]) -> int:
    """An exec request (see `fork_exec`) carried out by `launcher`, started with posix_spawn:
    no copy of this process's memory, where a fork copied every page either side wrote before
    the child's exec. The launcher starts in a session of its own, in /, with stdin /dev/null,
    stdout and stderr appended to the log, the attached descriptors at their numbers and nothing
    else open; it joins the groups and executes argv (launch.c)."""
    fds, held = carried_namespace(request, fds, "attach")
    fds, network = carried_namespace(request, fds, "network")
    argv, targets = exec_request(request, fds)
    procs = [str(path) for path in request["cgroup_procs"]]
    moved = copies_above(fds, targets)
    for fd in fds:
        os.set_inheritable(fd, False)  # received inheritable; closed by serve once we return
    log_flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    options: list[str] = []
    actions: list[tuple[Any, ...]] = []
    number = max([*moved, *targets, *(fd for fd in (held, network) if fd is not None)], default=2)
    if network is not None:  # at numbers no other action touches
        number += 1
        options += ["--network", str(number)]
        actions.append((os.POSIX_SPAWN_DUP2, network, number))
    if held is not None:
        number += 1
        options += ["--namespace", str(number), str(request["attach"])]
        actions.append((os.POSIX_SPAWN_DUP2, held, number))
    actions += [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(request["log"]), log_flags, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
        *[(os.POSIX_SPAWN_DUP2, fd, target) for fd, target in zip(moved, targets, strict=True)],
    ]
    try:
        return os.posix_spawn(
            launcher,
            [launcher, *options, *procs, "--", *argv],
            request_env(request),
            file_actions=actions,
            setsid=True,
            setsigdef=(SIGCHLD, *IGNORED_BY_PYTHON),
        )
    finally:
        for fd in moved:
            os.close(fd)


def fork_exec(request: dict[str, Any], fds: list[int], channel: Any) -> int:
    """A request {"exec": argv, "env", "log", "cgroup_procs", "fds"}: fork a child that joins
    the cgroups (writes its pid to each `cgroup_procs` file, before its first instruction of
    `argv`) after detaching as `fork_runner`'s runners do, puts the attached file descriptors at
    the numbers in "fds" (the numbers `argv` names) and executes `argv` (the `local` provider's
    bubblewrap). A failure in the child is written to the log, and it exits without executing."""
    if request.get("network"):  # never a sandbox with the host's network instead
        raise ValueError("only the launcher (launch.c) starts a command in a network namespace")
    fds, _ = carried_namespace(request, fds, "attach")  # only the launcher uses it
    argv, targets = exec_request(request, fds)
    env, procs = request_env(request), [str(path) for path in request["cgroup_procs"]]
    pid, log = fork_logging(request["log"])
    if pid:
        return pid
    try:  # the child
        channel.close()
        detach(log)
        for path in procs:
            with open(path, "w") as handle:
                handle.write(str(os.getpid()))
        place_fds(fds, targets)
        for signum in IGNORED_BY_PYTHON:  # an exec would keep them ignored
            signals.signal(signum, signals.SIG_DFL)
        os.execvpe(argv[0], argv, env)  # noqa: S606 - bubblewrap, found on the env's PATH
    except BaseException as error:
        print(f"runner spawner: {argv[0]}: {error}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(70)


def copies_above(fds: list[int], targets: list[int]) -> list[int]:
    """Close-on-exec copies of `fds` numbered above all of `fds` and `targets`, so that dup2-ing
    the copies to their targets, in any order, never overwrites one still to be placed."""
    import fcntl

    above = max([*fds, *targets], default=2) + 1
    return [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above) for fd in fds]


def place_fds(fds: list[int], targets: list[int]) -> None:
    """dup2 each of `fds` to its target number (inheritable there), whatever numbers overlap."""
    moved = copies_above(fds, targets)
    for fd in fds:
        os.close(fd)  # received without close-on-exec: the command must not inherit them twice
    for fd, target in zip(moved, targets, strict=True):
        os.dup2(fd, target)


def run_main(argv: list[str]) -> int:
    try:
        return main(argv)
    except OSError as failure:
        print(f"runner: {failure.strerror or failure}", file=sys.stderr)
        return 70


def exit_now(code: int) -> None:
    """Exit without the interpreter's clean-up (freeing every module and object: about a
    quarter of a short runner's CPU); the logs are unbuffered, so only stdio needs a flush."""
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib would cost every runner its import
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"] and len(sys.argv) in (3, 4):
        sys.exit(serve(int(sys.argv[2]), *sys.argv[3:]))
    exit_now(run_main(sys.argv[1:]))
