"""Webhook benchmark: signed deliveries over loopback to the real app (uvicorn, `--processes`
web processes as `evalbot serve --processes N` runs them), open loop at a fixed rate, with a fake
launcher (the hand-off is recorded, nothing runs) and the fake GitHub REST server in a process of
its own (PyGithub over real HTTP).

The mix is what a busy repository sends: 40% `/eval tiny` comments from collaborators on distinct
PRs (read the PR, plan, hand off, react), 20% `eval:tiny` labels (permission check, plan, hand
off), 40% chatter the bot ignores (non-/eval comments and unlabelled pushes). Latency is measured
from each delivery's scheduled send time (no coordinated omission) to the response. At the end the
server reports what it saw, and every delivery must be accounted for: one response each, one
recorded delivery id per delivery acted on, one experiment per started request.

    .venv/bin/python benchmarks/webhook.py [--rate 200 --seconds 10 --warmup 2 --processes 2]
        [--repeat 3] [--record]

`--record` writes the figures into benchmarks/RESULTS.md (between the webhook markers).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from results_file import write_section  # noqa: E402  (benchmarks/, the script's folder)

from bot.webhooks.signature import sign  # noqa: E402
from tests.bot.payloads import SECRET, pr_comment, pull_event, pull_json  # noqa: E402
from workflows.ports import free_port  # noqa: E402

REPO = "Codertocat/Hello-World"
SECTION = "webhook"  # its markers in RESULTS.md (results_file.py)


# -- the fake GitHub and the bot, each in its own process ------------------------------------------


def run_github(ready: Any, stop: Any, pulls: int) -> None:
    from tests.fakes.github_server import FakeGitHub

    fake = FakeGitHub().start()
    comments = []
    for number in range(1, pulls + 1):
        pull = pull_json(head_sha=f"{number:040x}")
        pull["number"] = number
        fake.add_pull(pull)
        comments.append(fake.add_comment(REPO, number, "/eval tiny --trials 1", "Codertocat")["id"])
    fake.set_permission(REPO, "Codertocat", "write")
    ready.send(((fake.base_url, fake.app_private_key, fake.app_id), comments))
    cpu_before = _cpu_s()
    stop.wait()
    ready.send((len(fake.calls), _cpu_s() - cpu_before))


class RecordingLauncher:
    """The fake launcher, also appending each hand-off to a file (processes are counted apart)."""

    def __init__(self, path: Path) -> None:
        from tests.fakes.launcher import FakeLauncher

        self._fake = FakeLauncher()
        self._path = path

    async def start(self, spec: Any, reporter: dict[str, Any]) -> str:
        with self._path.open("a") as handle:
            handle.write(spec.experiment_id + "\n")
        return await self._fake.start(spec, reporter)

    def __getattr__(self, name: str) -> Any:  # cancel, rerun, status, find
        return getattr(self._fake, name)


def bench_app() -> Any:
    """`uvicorn --factory` entry point: the real app with the recording launcher, per process."""
    from bot.app import create_app
    from bot.github.github_client import ClientOptions, GitHubClients
    from workflows.settings import Settings
    from workflows.store import Store

    settings = Settings()
    fast = ClientOptions(retries=0, seconds_between_requests=0, seconds_between_writes=0)
    launcher: Any = RecordingLauncher(Path(os.environ["BENCH_HANDOFFS"]))
    clients = GitHubClients(settings, options=fast)
    return create_app(settings, launcher, Store.from_settings(settings), github=clients)


def start_bot(github: tuple[str, str, int], data_dir: Path, processes: int) -> tuple[Any, int]:
    """`uvicorn --workers N` on the bench app, after migrating the database once."""
    from workflows.settings import Settings
    from workflows.store import Store

    base_url, key, app_id = github
    env = {
        **os.environ,
        "EVALBOT_DATA_DIR": str(data_dir),
        "EVALBOT_CATALOG_ROOT": str(REPO_ROOT / "tests" / "fixtures" / "catalog"),
        "EVALBOT_GITHUB_WEBHOOK_SECRET": SECRET,
        "EVALBOT_GITHUB_API_URL": base_url,
        "EVALBOT_GITHUB_APP_ID": str(app_id),
        "EVALBOT_GITHUB_PRIVATE_KEY": key,
        "BENCH_HANDOFFS": str(data_dir / "handoffs.txt"),
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'benchmarks'}",
    }
    Store.from_settings(Settings(data_dir=data_dir)).migrate()
    (data_dir / "handoffs.txt").touch()
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "webhook:bench_app", "--factory",
               "--host", "127.0.0.1", "--port", str(port), "--workers", str(processes),
               "--log-level", "warning", "--no-access-log"]  # fmt: skip
    bot = subprocess.Popen(command, env=env, cwd=REPO_ROOT / "benchmarks")
    try:
        _wait_healthy(port, bot, processes)
    except BaseException:
        _stop(bot)
        raise
    return bot, port


def _stop(bot: Any) -> None:
    bot.send_signal(signal.SIGINT)
    try:
        bot.wait(30)
    except subprocess.TimeoutExpired:
        for pid in reversed(_process_tree(bot.pid)):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        bot.wait(10)


def _wait_healthy(port: int, bot: Any, processes: int) -> None:
    """Until /healthz answers and every process is up (their CPU is measured from then on)."""
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if bot.poll() is not None:
            raise SystemExit("the bot did not start")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                if processes == 1 or len(_process_tree(bot.pid)) > processes:
                    time.sleep(1.0)  # let the last process finish importing
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the bot did not become healthy")


def _process_tree(pid: int) -> list[int]:
    found = [pid]
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                found += _process_tree(int(child))
    return found


def _tree_cpu_s(pids: list[int]) -> float:
    """utime + stime of the processes, from /proc (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def server_counts(data_dir: Path) -> dict[str, int]:
    handoffs = (data_dir / "handoffs.txt").read_text().split()
    with sqlite3.connect(data_dir / "evalbot.db") as db:
        (recorded,) = db.execute("SELECT count(*) FROM webhook_deliveries").fetchone()
    return {"started": len(handoffs), "experiments": len(set(handoffs)), "deliveries": recorded}


def _cpu_s() -> float:
    """CPU seconds (user + system) this process has used: independent of other load."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the load ------------------------------------------------------------------------------------


@dataclass
class Delivery:
    kind: str
    event: str
    body: bytes
    expect: str


def deliveries(total: int, comment_ids: list[int]) -> list[Delivery]:
    """The mix, one PR per /eval comment or label so that each starts a distinct experiment."""
    made = []
    for index in range(total):
        number = index + 1
        slot = index % 5
        if slot in (0, 1):
            payload = pr_comment("/eval tiny --trials 1")
            payload["issue"]["number"] = number
            payload["comment"]["id"] = comment_ids[index]
            made.append(Delivery("eval comment", "issue_comment", _json(payload), "started"))
        elif slot == 2:
            payload = pull_event("labeled", label="eval:tiny", labels=["eval:tiny"])
            payload["pull_request"]["number"] = number
            made.append(Delivery("eval label", "pull_request", _json(payload), "started"))
        elif slot == 3:
            payload = pr_comment("Looks good to me, thanks!")
            made.append(Delivery("chatter comment", "issue_comment", _json(payload), "ignored"))
        else:
            payload = pull_event("labeled", label="documentation", labels=["documentation"])
            made.append(Delivery("other label", "pull_request", _json(payload), "ignored"))
    return made


def _json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


@dataclass
class Outcome:
    kind: str
    due_s: float  # when it was due, from the start of the run
    latency_ms: float
    service_ms: float
    status: int
    action: str


_T0 = [0.0]  # the run's start (perf_counter), for due times
REQUEST_TIMEOUT_S = 30.0


@dataclass
class Load:
    outcomes: list[Outcome] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


async def send_all(port: int, plan: list[Delivery], rate: float, connections: int) -> Load:
    """Open loop: delivery i is due at start + i/rate and goes out on the first free keep-alive
    connection (a minimal HTTP/1.1 client: the load generator shares the CPU with the server)."""
    load, queue = Load(), asyncio.Queue[tuple[Delivery, float] | None]()
    start = time.perf_counter() + 0.2
    _T0[0] = start

    async def produce() -> None:
        for index, item in enumerate(plan):
            due = start + index / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            queue.put_nowait((item, due))
        for _ in range(connections):
            queue.put_nowait(None)

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while (job := await queue.get()) is not None:
            if not await _send(reader, writer, *job, load):  # a broken connection: start afresh
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    await asyncio.gather(produce(), *(connection() for _ in range(connections)))
    return load


async def _send(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    item: Delivery,
    due: float,
    load: Load,
) -> bool:
    sent = time.perf_counter()
    headers = (
        f"POST /github/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(item.body)}\r\n"
        f"X-GitHub-Event: {item.event}\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
        f"X-Hub-Signature-256: {sign(SECRET.encode(), item.body)}\r\n\r\n"
    )
    try:
        writer.write(headers.encode() + item.body)
        status, body = await asyncio.wait_for(_response(reader), REQUEST_TIMEOUT_S)
    except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as error:
        load.failures.append(f"{item.kind}: {type(error).__name__}")
        return False
    done = time.perf_counter()
    action = json.loads(body).get("action", "") if status == 200 else ""
    since_start, latency_ms = due - _T0[0], (done - due) * 1e3
    load.outcomes.append(
        Outcome(item.kind, since_start, latency_ms, (done - sent) * 1e3, status, action)
    )
    return True


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, await reader.readexactly(length) if length else b""


# -- the report ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(
    load: Load, plan: list[Delivery], wall_s: float, server: dict[str, int], warmup_s: float
) -> list[str]:
    """Latency of the steady state (after `warmup_s`: each process's first token, connections
    and catalog load); the warm-up is reported apart and still accounted for."""
    steady = [o for o in load.outcomes if o.due_s >= warmup_s]
    cold = [o.latency_ms for o in load.outcomes if o.due_s < warmup_s]
    latencies = [o.latency_ms for o in steady]
    lines = [
        f"deliveries sent: {len(plan)} in {wall_s:.2f} s → "
        f"throughput {len(load.outcomes) / wall_s:.0f}/s",
        f"ack latency after {warmup_s:g} s of warm-up (n={len(steady)}, from scheduled send): "
        f"p50 {percentile(latencies, 0.5):.1f} ms · p99 {percentile(latencies, 0.99):.1f} ms · "
        f"max {max(latencies):.1f} ms",
    ]
    for kind in dict.fromkeys(d.kind for d in plan):
        mine = [o.latency_ms for o in steady if o.kind == kind]
        lines.append(
            f"  {kind:<16} n={len(mine):<5} p50 {percentile(mine, 0.5):6.1f} ms · "
            f"p99 {percentile(mine, 0.99):6.1f} ms"
        )
    if cold:
        lines.append(
            f"warm-up (n={len(cold)}): p50 {percentile(cold, 0.5):.1f} ms · "
            f"p99 {percentile(cold, 0.99):.1f} ms"
        )
    lines.append("p99 by second: " + " ".join(f"{p:.0f}" for p in _p99_by_second(load)) + " ms")
    return lines + accounting(load, plan, server)


def _p99_by_second(load: Load) -> list[float]:
    by_second: dict[int, list[float]] = {}
    for outcome in load.outcomes:
        by_second.setdefault(int(outcome.due_s), []).append(outcome.latency_ms)
    return [percentile(v, 0.99) for _, v in sorted(by_second.items())]


def accounting(load: Load, plan: list[Delivery], server: dict[str, int]) -> list[str]:
    expected = {kind: sum(1 for d in plan if d.kind == kind) for kind in {d.kind for d in plan}}
    wrong = [o for o in load.outcomes if o.status != 200]
    starts = sum(1 for d in plan if d.expect == "started")
    started = sum(1 for o in load.outcomes if o.action == "started")
    complete = (
        len(load.outcomes) == len(plan)
        and not load.failures
        and not wrong
        and started == starts == server["experiments"] == server["started"]
        and server["deliveries"] == starts  # ignored deliveries are answered, not recorded
    )
    return [
        f"accounted for: {len(load.outcomes)}/{len(plan)} answered, {len(wrong)} non-200, "
        f"{len(load.failures)} transport errors; {started}/{starts} started (launcher saw "
        f"{server['started']} hand-offs, {server['experiments']} experiments); "
        f"{server['deliveries']} delivery ids recorded (the {starts} acted on); mix {expected}",
        "EVERY DELIVERY ACCOUNTED FOR" if complete else "MISSING OR WRONG DELIVERIES",
    ]


def record(runs: list[list[str]]) -> None:
    block = "\n".join(
        ["## Webhook acknowledgement (benchmarks/webhook.py)", "",
         f"`benchmarks/webhook.py {' '.join(sys.argv[1:])}` on {platform.node()}, "
         f"{os.cpu_count()} cores shared with whatever else runs there (the load averages are in "
         "each run); each run is a fresh fake GitHub, database and bot:", "",
         *(line for index, lines in enumerate(runs, 1)
           for line in [f"Run {index}:", "", "```", *lines, "```", ""])]
    )  # fmt: skip
    write_section(SECTION, block)


def run_once(args: argparse.Namespace) -> list[str]:
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    total = int(args.rate * (args.seconds + args.warmup))
    ctx = mp.get_context("spawn")
    gh_parent, gh_child = ctx.Pipe()
    stop = ctx.Event()
    with tempfile.TemporaryDirectory() as tmp:
        github = ctx.Process(target=run_github, args=(gh_child, stop, total), daemon=True)
        github.start()
        where, comment_ids = gh_parent.recv()
        plan = deliveries(total, comment_ids)
        bot, port = start_bot(where, Path(tmp), args.processes)
        try:
            pids = _process_tree(bot.pid)
            bot_cpu_before = _tree_cpu_s(pids)
            began, cpu_before = time.perf_counter(), _cpu_s()
            load = asyncio.run(send_all(port, plan, args.rate, args.connections))
            wall = time.perf_counter() - began - 0.2
            sender_cpu = _cpu_s() - cpu_before
            server = {**server_counts(Path(tmp)), "cpu_s": _tree_cpu_s(pids) - bot_cpu_before}
        finally:
            _stop(bot)
            stop.set()
        github_calls, github_cpu = gh_parent.recv()
        github.join(10)
    per = 1e3 / len(plan)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        *summary(load, plan, wall, server, args.warmup),
        f"fake GitHub served {github_calls} API calls",
        f"CPU per delivery: bot ({args.processes} processes) {server['cpu_s'] * per:.2f} ms · "
        f"fake GitHub {github_cpu * per:.2f} ms · load generator {sender_cpu * per:.2f} ms",
        f"load average before: {load_before} · after: {load_after}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, after warm-up")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds at the same rate first")
    parser.add_argument("--connections", type=int, default=64, help="keep-alive connections")
    parser.add_argument("--processes", type=int, default=2, help="web processes (uvicorn workers)")
    parser.add_argument("--repeat", type=int, default=1, help="independent runs")
    parser.add_argument("--record", action="store_true", help="write into benchmarks/RESULTS.md")
    args = parser.parse_args()
    runs = []
    for index in range(args.repeat):
        runs.append(run_once(args))
        print(f"-- run {index + 1}", *runs[-1], sep="\n", flush=True)
    if args.record:
        record(runs)


if __name__ == "__main__":
    main()
