"""What a fault test asserts on, gathered where it cannot be tidied away first.

- `snapshot_host`: the experiment's processes, mounts, cgroups, sandbox folders, uid claims and
  blob staging folders, taken when the experiment is over and BEFORE the test's own clean-up
  (which would otherwise hide what the engine left behind).
- `completions_per_cell`: how many times each cell's result was produced, read from the Temporal
  histories of its run workflows (`score` and `record_error` completions, as regular activities
  or local-activity markers) — not from the store, whose primary key makes duplicates impossible.
- `github_creations`: the sticky comments and check runs created on GitHub for the experiment,
  from the fake GitHub's request log (a comment created twice and then de-duplicated still shows).
- `judge_requests_per_answer`: answered judge requests per cell, from the fake judge's log.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from tests.fakes.github_server import FakeGitHub
from tests.fakes.openai_server import FakeOpenAI
from tests.support.mounts import mount_points
from workflows.engine.engine_client import quoted
from workflows.providers.common.sandbox_layout import sandbox_slug
from workflows.providers.local.cgroups import CGROUP_ROOT
from workflows.providers.local.slots import HOST_UID_DIR, UidSlots
from workflows.settings import Settings

RESULT_ACTIVITIES = {
    "score",
    "finish_short_run",
    "run_short_cell",
    "record_error",
}  # each stores a result


@dataclass
class HostSnapshot:
    processes: list[str] = field(default_factory=list)  # "pid cmdline" with a cwd in a sandbox
    mounts: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    sandboxes: list[str] = field(default_factory=list)  # sandbox folders
    claims: list[str] = field(default_factory=list)  # uid slots
    staging: list[str] = field(default_factory=list)  # files in blob staging, never committed

    def items(self) -> list[str]:
        return [
            *(f"process {p}" for p in self.processes),
            *(f"mount {m}" for m in self.mounts),
            *(f"cgroup {c}" for c in self.cgroups),
            *(f"sandbox {s}" for s in self.sandboxes),
            *(f"uid claim {c}" for c in self.claims),
            *(f"staging {s}" for s in self.staging),
        ]


def snapshot_host(settings: Settings, experiment_id: str) -> HostSnapshot:
    """What this experiment has on the host now; take it before any clean-up by the test. The
    sandbox, blob and uid folders are the test's own; cgroups are matched by the experiment."""
    sandboxes = settings.sandbox_dir
    slug = sandbox_slug(experiment_id) if experiment_id else "\0"
    return HostSnapshot(
        processes=_processes_in(sandboxes),
        mounts=_mounts_under(sandboxes),
        cgroups=sorted(str(p) for p in CGROUP_ROOT.glob(f"*/evalbot/{slug}*") if p.is_dir())
        # no-cgroup mode's stand-ins for the groups (workflows/providers/local/no_cgroups.py)
        + sorted(str(p) for p in (settings.sandbox_dir / ".groups").glob(f"evalbot/{slug}*")),
        sandboxes=_entries(sandboxes),
        claims=sorted(
            str(claim.uid)
            for claim in UidSlots(HOST_UID_DIR, 0, 0, home=sandboxes).claims()
            if claim.owner.startswith(slug) and claim.home == sandboxes.absolute()
        ),
        staging=_files(settings.blob_dir / ".staging"),
    )


def _listing(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in _listing(folder) if not p.name.startswith("."))


def _text(path: Path) -> str:
    """The file's text, or "" when it is not a file or vanished since it was listed (a snapshot
    may be taken mid-run, while the worker claims and releases)."""
    try:
        return path.read_text()
    except OSError:
        return ""


def _files(folder: Path) -> list[str]:
    """Files under `folder` (a committed staging folder is moved away whole; its empty parent
    folders stay and are not residue). `os.walk` skips folders that vanish during the walk, which
    happens when the snapshot is taken mid-run."""
    return sorted(
        str((Path(root) / name).relative_to(folder))
        for root, _, names in os.walk(folder)
        for name in names
    )


def _processes_in(folder: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
        if cwd.startswith(str(folder) + "/"):
            found.append(f"{entry.name} {command.strip()[:120]}")
    return sorted(found)


def _mounts_under(folder: Path) -> list[str]:
    return sorted(point for point in mount_points() if str(folder) in point)


# -- Temporal history ---------------------------------------------------------------------------


async def completions_per_cell(client: Client, experiment_id: str) -> Counter[str]:
    """Result-producing activity completions per run id, over every run workflow execution of the
    experiment (retried, reset or restarted executions included)."""
    query = (
        'WorkflowType IN ("RunWorkflow", "RunBatchWorkflow") '
        f'AND WorkflowId STARTS_WITH "{quoted(experiment_id)}/"'
    )
    counts: Counter[str] = Counter()
    async for execution in client.list_workflows(query):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        scheduled: dict[int, str] = {}
        async for event in handle.fetch_history_events():
            for run_id in _results(event, scheduled):
                counts[run_id] += 1
    return counts


def _results(event: Any, scheduled: dict[int, str]) -> list[str]:
    if event.HasField("activity_task_scheduled_event_attributes"):
        attributes = event.activity_task_scheduled_event_attributes
        scheduled[event.event_id] = attributes.activity_type.name
    elif event.HasField("activity_task_completed_event_attributes"):
        attributes = event.activity_task_completed_event_attributes
        if scheduled.get(attributes.scheduled_event_id) in RESULT_ACTIVITIES:
            return _run_ids(attributes.result.payloads)
    elif event.HasField("marker_recorded_event_attributes"):
        details = event.marker_recorded_event_attributes.details
        if "data" in details and "result" in details and details["result"].payloads:
            data = json.loads(details["data"].payloads[0].data)
            if data.get("activity_type") in RESULT_ACTIVITIES:
                return _run_ids(details["result"].payloads)
    return []


def _run_ids(payloads: Any) -> list[str]:
    return [str(json.loads(p.data)["run_id"]) for p in payloads if p.data]


# -- side effects at the wire ---------------------------------------------------------------------


@dataclass(frozen=True)
class Creations:
    comments: int  # sticky comments created on the PR by the bot
    check_runs: int  # check runs created for the experiment

    def duplicates(self) -> int:
        return max(0, self.comments - 1) + max(0, self.check_runs - 1)


def github_creations(github: FakeGitHub, repo: str, number: int, experiment_id: str) -> Creations:
    comments = github.calls_to("POST", rf"^/repos/{re.escape(repo)}/issues/{number}/comments$")
    runs = github.calls_to("POST", rf"^/repos/{re.escape(repo)}/check-runs$")
    return Creations(
        comments=sum(1 for c in comments if c.status < 300 and c.auth.startswith("token")),
        check_runs=sum(
            1
            for c in runs
            if c.status < 300
            and isinstance(c.body, dict)
            and c.body.get("external_id") == experiment_id
        ),
    )


ANSWER = re.compile(r"the answer is \d+ \(run \d+\)")  # the chaos agent's, one per cell


def judge_requests_per_answer(judge: FakeOpenAI) -> Counter[str]:
    """Answered (200) judge requests per graded answer (the arm's number and the run's seed name
    its cell)."""
    counts: Counter[str] = Counter()
    for request in judge.log():
        if request.status == 200:
            found = ANSWER.search(json.dumps(request.body))
            counts[found.group() if found else "?"] += 1
    return counts
