"""Hostile agents in one experiment beside ordinary ones, through Temporal and the local provider:
each hostile cell ends as a classified error in its own cell, the ordinary cells score normally,
and the host is untouched."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from pathlib import Path

import pytest

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.support.agent_repo import REPO_ROOT, TINY_AGENT
from tests.support.experiments import hostile_arms
from workflows.engine.planning import plan_experiment
from workflows.engine.repos import commit_all, init_repo
from workflows.records import RunStatus
from workflows.settings import Settings

HOSTILE_AGENTS = REPO_ROOT / "tests" / "fakes" / "agents"
MARKER = "evalbot-host-secret-4e1f9c"

DISPATCH = '''
"""Run the tiny agent, or the hostile script named by arm config `hostile`."""
import json, os, sys
case = json.load(open(os.path.join(os.environ.get("EVALBOT_CASE_DIR", "/case"), "case.json")))
config = case["arm"]["config"]
hostile = config.get("hostile")
if not hostile:
    os.execvp("python3", ["python3", "agent.py"])
args = [a for a in config.get("args", "").split(";") if a]
os.chdir("agents")
os.execvp("python3", ["python3", hostile + ".py", *args])
'''

EVALBOT_TOML = """
[build]
setup = "python3 -m compileall -q ."
[run]
command = "python3 dispatch.py"
timeout_s = 6
[sandbox]
memory_mb = 128
pids = 64
disk_mb = 64
"""

# hostile agent -> the error class its cell must end with
EXPECTED = {
    "network": RunStatus.OUTPUT_ERROR,  # every connection fails; it writes no answer
    "snoop": RunStatus.OUTPUT_ERROR,  # finds nothing of the host's; writes no answer
    "escape_writes": RunStatus.OUTPUT_ERROR,  # every write outside /out fails
    "fork_bomb": RunStatus.TIMEOUT,  # contained by the pids cgroup, then killed at the deadline
    "memory_hog": RunStatus.OUT_OF_MEMORY,
    "flood_stdout": RunStatus.RESOURCE_LIMIT,
    "never_exits": RunStatus.TIMEOUT,
}


def hostile_repo(dest: Path) -> str:
    shutil.copytree(TINY_AGENT, dest)
    shutil.copytree(HOSTILE_AGENTS, dest / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "dispatch.py").write_text(DISPATCH)
    (dest / "evalbot.toml").write_text(EVALBOT_TOML)
    init_repo(dest)
    return commit_all(dest, "agent with hostile modes")


def experiment_processes(experiment_id: str) -> list[str]:
    """Processes still in a cgroup of this experiment's sandboxes (`evalbot/<run slug>-<hex>`);
    other tests' sandboxes, running beside this one, are not this test's concern."""
    slug = re.sub(r"[^a-z0-9]+", "-", experiment_id.lower()).strip("-")
    found = []
    for proc in Path("/proc").iterdir():
        try:
            groups = (proc / "cgroup").read_text() if proc.name.isdigit() else ""
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0] if groups else ""
        except (OSError, IndexError):
            continue
        if f"evalbot/{slug}" in groups and state != "Z":  # a zombie runs nothing; it is reaped
            found.append(proc.name)
    return found


async def no_processes_left(experiment_id: str, within_s: float = 10) -> list[str]:
    """Wait (briefly, on a loaded machine) for the experiment's sandbox processes to be gone."""
    deadline = time.monotonic() + within_s
    left = experiment_processes(experiment_id)
    for _ in range(int(within_s / 0.2)):
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
        left = experiment_processes(experiment_id)
    return left


def all_text_under(folder: Path) -> str:
    return "\n".join(
        p.read_bytes().decode(errors="replace") for p in folder.rglob("*") if p.is_file()
    )


async def test_hostile_cells_are_classified_and_contained(
    engine_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALBOT_HOST_MARKER", MARKER)  # the worker runs in this process
    planted = tmp_path / "host-only"
    planted.mkdir()
    (planted / "credentials").write_text(MARKER)
    commit = hostile_repo(tmp_path / "agent")
    port = 9  # nothing listens; the sandbox has no route to it anyway
    args = {
        "network": f"127.0.0.1;{port}",
        "snoop": str(planted),
    }
    arms = hostile_arms(commit, list(EXPECTED), args)
    spec = plan_experiment(
        engine_settings,
        repo=str(tmp_path / "agent"),
        dataset="tiny",
        arms=arms,
        trials=1,
        case_selectors=["supply-governing-law", "lease-rent"],
    )
    store = open_store(engine_settings)
    await run_experiment(engine_settings, store, spec, max_parallel=8, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in runs) == sorted(c.run_id for c in spec.cells())
    by_arm: dict[str, set[RunStatus]] = {}
    for run in runs:
        by_arm.setdefault(run.arm, set()).add(run.status)
    assert by_arm["ordinary"] == {RunStatus.SCORED}
    for name, status in EXPECTED.items():
        assert by_arm[name.replace("_", "-")] == {status}, (name, by_arm)

    blobs = all_text_under(engine_settings.blob_dir)
    assert MARKER not in blobs  # neither the host's environment nor its files reached a run
    for run in (r for r in runs if r.arm == "network"):
        attempts = json.loads(
            (engine_settings.blob_dir / run.outputs_ref / "out" / "result.json").read_text()
        )
        assert attempts and all(v.startswith("failed") for v in attempts.values()), attempts
    assert await no_processes_left(spec.experiment_id) == []  # nothing of its sandboxes runs on
    images = engine_settings.image_dir
    assert not [p for p in images.rglob("escaped*")]  # /repo stayed read-only
