"""More hostile agents (tests/fakes/agents/) in one experiment, through Temporal, the local
provider, the collector and the grader, beside an ordinary run and a victim run holding a secret:

symlinks out of /out, hard links into /out, a million tiny files, snooping on another run through
/proc, ptrace, mount attempts, setuid binaries, DNS exfiltration, and an answer built to inject
Markdown/HTML into the PR comment and the dashboard (carried into the report by a judge that
quotes answers). Each ends in its own cell with the expected class, is contained (checked from the
host's side), and leaves the other runs and the host untouched.
"""

from __future__ import annotations

import asyncio
import html.parser
import json
import re
import secrets
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from bot.github import report_comment as rc
from bot.render import render_html, render_json, render_markdown
from tests.chaos.evidence import snapshot_host
from tests.chaos.harness import write_catalog
from tests.chaos.record import record
from tests.fakes.openai_server import FakeOpenAI
from tests.support.experiments import hostile_arms
from tests.workflows.engine.test_hostile_experiment import hostile_repo
from workflows.engine.collect import MAX_OUT_FILES
from workflows.engine.planning import plan_experiment
from workflows.engine.repos import commit_all
from workflows.ports import free_port
from workflows.records import RunResult, RunStatus
from workflows.report import build_report
from workflows.settings import Settings

pytestmark = pytest.mark.timeout(300)

HOST_MARKER = "evalbot-host-only-7c1d2e"
EXPECTED = {
    "out_symlinks": RunStatus.OUTPUT_ERROR,  # its answer is a link: skipped, so no answer
    "out_hardlinks": RunStatus.OUTPUT_ERROR,
    "many_files": RunStatus.SCORED,  # it answered; the flood is capped
    "proc_snoop": RunStatus.OUTPUT_ERROR,
    "victim": RunStatus.SCORED,
    "ptrace": RunStatus.OUTPUT_ERROR,
    "mounts": RunStatus.OUTPUT_ERROR,
    "setuid": RunStatus.OUTPUT_ERROR,
    "dns_exfil": RunStatus.OUTPUT_ERROR,
    "inject_markup": RunStatus.SCORED,  # its answer is graded; the judge quotes it
}
WHAT = {
    "out_symlinks": "symlinks in /out to host files, /proc, the sandbox's metadata, /",
    "out_hardlinks": "hard links into /out to host, runner, case and repo files",
    "many_files": "a million tiny files in /out (inodes run out; collector cap)",
    "proc_snoop": "reading another run's env and files through /proc",
    "victim": "the run being snooped on keeps its outputs",
    "ptrace": "ptrace / process_vm_readv / /proc/1/mem on the runner",
    "mounts": "mount, remount, umount, unshare -m, chroot, pivot_root",
    "setuid": "setuid-root binaries, a setuid copy of python, setuid(0)",
    "dns_exfil": "DNS exfiltration (resolver, UDP/TCP 53, the host's loopback)",
    "inject_markup": "Markdown/HTML injection into the PR comment and dashboard",
}
ANSWER = re.compile(r"<answer>(.*)</answer>", re.DOTALL)


def quoting_judge(user_message: str) -> tuple[float, str]:
    """A judge that quotes the answer in its rationale (real judges do) and fails markup."""
    found = ANSWER.search(user_message)
    answer = found.group(1) if found else ""
    good = "answer is 42" in answer and "<" not in answer
    return float(good), f"The answer reads: {answer.strip()}"


class DnsSink(asyncio.DatagramProtocol):
    """A resolver on the host's loopback that records every query (there must be none)."""

    def __init__(self) -> None:
        self.packets: list[bytes] = []

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.packets.append(data)


async def probe_sink(port: int, sink: DnsSink, tcp_hits: list[bytes]) -> None:
    """Positive control: a query from the host reaches the sink (UDP and TCP); then forget it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"probe", ("127.0.0.1", port))
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"probe")
    await writer.drain()
    writer.close()
    for _ in range(100):
        if sink.packets and tcp_hits:
            break
        await asyncio.sleep(0.02)
    assert sink.packets == [b"probe"] and tcp_hits == [b"probe"]
    sink.packets.clear()
    tcp_hits.clear()


class Run:
    """One cell's stored result and what was collected from it."""

    def __init__(self, result: RunResult, blob_dir: Path) -> None:
        self.result = result
        # outputs_ref is a key in the local blob store (settings.blob_dir)
        self.folder = blob_dir / result.outputs_ref if result.outputs_ref else Path("/nonexistent")
        self.out = self.folder / "out"

    def observed(self) -> Any:
        path = self.out / "result.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def files(self) -> list[Path]:
        return [p for p in self.out.rglob("*") if p.is_file() or p.is_symlink()]

    def text(self) -> str:
        return "\n".join(p.read_bytes().decode(errors="replace") for p in self.files())


@pytest.fixture
def judge() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(api_key="sk-hostile", verdict=quoting_judge).start()
    yield server
    server.stop()


@pytest.mark.parametrize("cgroups", ["auto", "none"])  # this host's cgroups; no-cgroup mode
async def test_more_hostile_agents_are_classified_and_contained(
    cgroups: str,
    engine_settings: Settings,
    judge: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVALBOT_HOST_MARKER", HOST_MARKER)  # the worker runs in this process
    host_file = tmp_path / "host-only" / "credentials"
    host_file.parent.mkdir()
    host_file.write_text(HOST_MARKER)
    victim_secret = f"victim-{secrets.token_hex(8)}"
    exfil_secret = f"exfil{secrets.token_hex(8)}"
    loop = asyncio.get_running_loop()
    dns_port = free_port()
    transport, sink = await loop.create_datagram_endpoint(
        DnsSink, local_addr=("127.0.0.1", dns_port)
    )
    tcp_hits: list[bytes] = []

    async def on_tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tcp_hits.append(await reader.read(512))
        writer.close()

    tcp = await asyncio.start_server(on_tcp, "127.0.0.1", dns_port)
    await probe_sink(dns_port, sink, tcp_hits)  # it does hear what reaches it
    settings = engine_settings.with_changes(
        catalog_root=write_catalog(tmp_path / "catalog", cases=1, judged=True),
        sandbox={"max_concurrent_runs": 16, "cgroups": cgroups},
        judge={"base_url": judge.base_url, "api_key": "sk-hostile", "rate_per_s": 0},
    )
    hostile_repo(tmp_path / "agent")
    toml = tmp_path / "agent" / "evalbot.toml"  # more time than the engine's set: a loaded
    toml.write_text(toml.read_text().replace("timeout_s = 6", "timeout_s = 30"))  # 2-core host
    assert "timeout_s = 30" in toml.read_text()
    commit = commit_all(tmp_path / "agent", "hostile agents, 30 s each")
    args = {
        "out_symlinks": str(host_file),
        "victim": victim_secret,
        "dns_exfil": f"{exfil_secret};{dns_port}",
    }
    arms = hostile_arms(commit, list(EXPECTED), args)
    spec = plan_experiment(
        settings, repo=str(tmp_path / "agent"), dataset="chaos", arms=arms, trials=1
    )
    store = open_store(settings)
    try:
        await run_experiment(settings, store, spec, max_parallel=16, quiet=True)
    finally:
        transport.close()
        tcp.close()

    results = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in results) == sorted(c.run_id for c in spec.cells())
    runs = {r.arm.replace("-", "_"): Run(r, settings.blob_dir) for r in results}
    checks: dict[str, Callable[[], list[str]]] = {
        "out_symlinks": lambda: symlinks_not_followed(runs["out_symlinks"]),
        "out_hardlinks": lambda: hard_links_refused(runs["out_hardlinks"], settings),
        "many_files": lambda: flood_capped(runs["many_files"]),
        "proc_snoop": lambda: nothing_seen(runs["proc_snoop"], runs["victim"], victim_secret),
        "victim": lambda: victim_intact(runs["victim"], victim_secret),
        "ptrace": lambda: nothing_traced(runs["ptrace"]),
        "mounts": lambda: mounts_refused(runs["mounts"]),
        "setuid": lambda: no_privilege_gained(runs["setuid"]),
        "dns_exfil": lambda: nothing_resolved(runs["dns_exfil"], sink, tcp_hits, exfil_secret),
        "inject_markup": lambda: markup_inert(spec, results),
    }
    everywhere = host_untouched(settings, spec, host_file, results)
    problems: dict[str, list[str]] = {}
    for name, expected in EXPECTED.items():
        status = runs[name].result.status
        problems[name] = [f"status {status}, expected {expected}"] if status != expected else []
        problems[name] += checks[name]() + everywhere
        contained = int(not problems[name])
        record(
            "hostile", f"agent: {WHAT[name]}", tried=1, contained=contained, detail=problems[name]
        )

    assert runs["ordinary"].result.status is RunStatus.SCORED
    assert runs["ordinary"].result.score == 1.0  # the ordinary run beside them is unaffected
    assert {name: found for name, found in problems.items() if found} == {}


# -- per agent --------------------------------------------------------------------------------


def symlinks_not_followed(run: Run) -> list[str]:
    problems = []
    planted = run.observed() or {}
    if not planted or any(v != "linked" for v in planted.values()):
        problems.append(f"the links were not all planted: {planted}")  # else the test is void
    collected = {p.relative_to(run.out).as_posix() for p in run.files()}
    followed = sorted(set(planted) & collected)
    if followed or any(p.is_symlink() for p in run.files()):
        problems.append(f"links collected: {followed}")
    text = run.text()
    for leak in (HOST_MARKER, "root:x:0:0", '"provider": "local"', "evalbot worker"):
        if leak in text:
            problems.append(f"host content in the collected outputs: {leak!r}")
    return problems


def hard_links_refused(run: Run, settings: Settings) -> list[str]:
    links = run.observed() or {}
    outside = {k: v for k, v in links.items() if k != "own-world"}
    problems = [f"hard link to {k} allowed" for k, v in outside.items() if v == "linked"]
    if len(outside) < 7:
        problems.append(f"not every link was tried: {links}")
    runner = (
        Path(__file__).parents[3] / "workflows" / "providers" / "common" / "runner.py"
    ).read_text()
    if runner[:200] in run.text():
        problems.append("the runner's source was collected")
    return problems


def flood_capped(run: Run) -> list[str]:
    observed = run.observed() or {}
    collected = len(run.files())
    problems = []
    if observed.get("created", 0) <= MAX_OUT_FILES:
        problems.append(f"the agent made only {observed} files: the cap was not exercised")
    if collected > MAX_OUT_FILES:
        problems.append(f"{collected} files collected, more than the cap {MAX_OUT_FILES}")
    if not (run.out / "answer.md").is_file():
        problems.append("its answer was not collected")
    return problems


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def nothing_seen(snoop: Run, victim: Run, secret: str) -> list[str]:
    seen, victim_said = snoop.observed() or {}, victim.observed() or {}
    problems = []
    if not (seen.get("window") and victim_said.get("window")):
        problems.append("the snooper or the victim did not report")
    elif not overlap(seen["window"], victim_said["window"]):
        problems.append("the snooper did not run while the victim held its secret: test void")
    if secret in snoop.text():
        problems.append("the snooper read the victim's secret")
    if len(seen.get("pids_seen", [])) > 10:
        problems.append(f"the snooper saw {len(seen['pids_seen'])} processes")
    return problems


def victim_intact(victim: Run, secret: str) -> list[str]:
    world_copy = victim.folder / "world_changes" / "victim.txt"
    problems = []
    if (victim.out / "victim.txt").read_text() != secret:
        problems.append("its /out was changed")
    if not world_copy.is_file() or world_copy.read_text() != secret:
        problems.append("its /world was changed")
    return problems


def nothing_traced(run: Run) -> list[str]:
    tried = run.observed() or {}
    problems = [] if "1" in tried else ["the runner (pid 1) was not tried"]
    runner = tried.get("1", {})  # the other pids it sees are its own shell: its to trace
    problems += [f"{what} on the runner" for what, v in runner.items() if not v.startswith("f")]
    if len(tried) > 3:
        problems.append(f"it sees {len(tried)} processes: {sorted(tried)}")
    return problems


def mounts_refused(run: Run) -> list[str]:
    tried = run.observed() or {}
    problems = [] if len(tried) >= 11 else [f"not every mount was tried: {tried}"]
    return problems + [f"{k}: {v}" for k, v in tried.items() if not v.startswith("failed")]


def no_privilege_gained(run: Run) -> list[str]:
    seen = run.observed() or {}
    problems = []
    if not seen.get("setuid_binaries"):
        problems.append("no setuid binary found to try: test void")
    probe = seen.get("setuid copy of python", "")
    if not probe.startswith("exit 0: ") or probe.split()[2] == "0":
        problems.append(f"setuid python: {probe}")
    for key in ("setuid(0)", "setgid(0)", "chown to root"):
        if seen.get(key) != "failed: Operation not permitted":
            problems.append(f"{key}: {seen.get(key)}")
    for key in ("su", "mount", "sudo"):
        if str(seen.get(key, "")).startswith("exit 0"):
            problems.append(f"{key} succeeded: {seen[key]}")
    if seen.get("euid") == 0:
        problems.append("the agent ran as root")
    special = stat.S_ISUID | stat.S_ISGID
    modes = [p for p in run.folder.rglob("*") if p.stat().st_mode & special]
    if modes:
        problems.append(f"setuid/setgid files in the blob store: {modes}")
    return problems


def nothing_resolved(run: Run, sink: DnsSink, tcp: list[bytes], secret: str) -> list[str]:
    tried = run.observed() or {}
    problems = [] if len(tried) >= 11 else [f"not every query was tried: {tried}"]
    if not str(tried.get("getaddrinfo", "")).startswith("failed"):
        problems.append(f"the name resolved: {tried.get('getaddrinfo')}")
    answered = [k for k, v in tried.items() if v in ("answered", "resolved")]
    if answered:
        problems.append(f"answered: {answered}")
    if sink.packets or tcp:
        problems.append(f"the host's resolver got {len(sink.packets)} + {len(tcp)} queries")
    if any(secret.encode() in p for p in [*sink.packets, *tcp]):
        problems.append("the secret left the sandbox")
    return problems


class Elements(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def markup_inert(spec: Any, results: list[RunResult]) -> list[str]:
    report = build_report(spec, results)
    problems = []
    if "<script>alert(1)</script>" not in render_json(report):
        problems.append("the payload never reached the report: test void")
    markdown = rc.comment_body(spec, render_markdown(report))
    for shown in ("forged", "octocat", "javascript", "evil.example", "script"):
        if shown not in markdown:
            problems.append(f"{shown!r} is not in the comment at all: its escaping is untested")
    for raw in ("<script", "<img", "</details></table>", "![t]", "@octocat", "<!-- evalbot:exp"):
        if markdown.count(raw) > (raw == "<!-- evalbot:exp"):  # the real marker once
            problems.append(f"raw {raw!r} in the PR comment")
    if re.search(r"(?<!\\)\]\(javascript:", markdown):
        problems.append("a live javascript: link in the PR comment")
    if markdown.count("<details>") != markdown.count("</details>"):
        problems.append("unbalanced <details> in the PR comment")
    if "\n| pwned | yes |" in markdown:
        problems.append("an injected table row in the PR comment")
    page = Elements()
    page.feed(render_html(report))
    tags = {tag for tag, _ in page.tags}
    attrs = {name for _, pairs in page.tags for name, _ in pairs}
    if "script" in tags and "alert(" in str(page.tags):
        problems.append("a script element in the dashboard page")
    if {"img"} & tags or any(a.startswith("on") for a in attrs):
        problems.append("an injected element or event handler in the dashboard page")
    return problems


def host_untouched(
    settings: Settings, spec: Any, host_file: Path, results: list[RunResult]
) -> list[str]:
    problems = []
    if host_file.read_text() != HOST_MARKER or len(list(host_file.parent.iterdir())) != 1:
        problems.append("the host folder was changed")
    blobs = "\n".join(
        p.read_bytes().decode(errors="replace")
        for p in settings.blob_dir.rglob("*")
        if p.is_file() and p.name != "victim.txt"
    )
    if HOST_MARKER in blobs:
        problems.append("a host secret reached the blob store")
    residue = snapshot_host(settings, spec.experiment_id).items()
    if residue:
        problems.append(f"left on the host: {residue[:3]}")
    if list(settings.image_dir.rglob("escaped*")):
        problems.append("the image was written to")
    return problems
