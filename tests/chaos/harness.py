"""The experiment the fault tests run: a generated catalog, a trivial shell agent, a worker in a
subprocess, and the checks every fault test ends with.

Cells: CASES cases x 2 arms (`base`, `head`) x TRIALS trials = 200 by default
(`EVALBOT_CHAOS_TRIALS` sets TRIALS: benchmarks/reliability.py `--trials` for a reduced run).
The agent sleeps a little (so faults land mid-run), writes a transcript, an answer (`41` on base,
`42` on head, so the report has a real difference; each answer names its run, so no judge cache
answers for it) and its usage. Two cases fail on purpose, the same way every
time, so "no cell marked failed that did not fail" is checked both ways:

- `case-03` exits 3 without an answer      -> agent_error
- `case-07` exits 0 without an answer      -> output_error
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from temporalio.client import Client

from bot.github import report_comment as rc
from bot.identity import BASE_ARM, HEAD_ARM
from bot.render import render_markdown
from tests.chaos.evidence import (
    HostSnapshot,
    completions_per_cell,
    github_creations,
    snapshot_host,
)
from tests.fakes.github_server import FakeGitHub
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.engine_client import run_executions
from workflows.engine.planning import plan_experiment
from workflows.engine.repos import commit_all, init_repo
from workflows.providers import create_provider
from workflows.providers.base import SandboxError
from workflows.records import RunResult, RunStatus
from workflows.report import build_report
from workflows.settings import Settings, setting_fields
from workflows.store import Store

CASES = 10
TRIALS = int(os.environ.get("EVALBOT_CHAOS_TRIALS", "10"))
FAILING = {"case-03": RunStatus.AGENT_ERROR, "case-07": RunStatus.OUTPUT_ERROR}

AGENT = r"""#!/bin/sh
# Trivial agent for fault tests: sleep, then answer (or fail on purpose for two cases).
out="$EVALBOT_OUT_DIR"
sleep "${CHAOS_SLEEP_S:-0.3}"
printf '{"kind":"start"}\n{"kind":"finish"}\n' > "$out/transcript.jsonl"
if grep -q '"id": "case-03"' "$EVALBOT_CASE_DIR/case.json"; then exit 3; fi
if grep -q '"id": "case-07"' "$EVALBOT_CASE_DIR/case.json"; then exit 0; fi
seed=$(grep -o '"seed": [0-9]*' "$EVALBOT_CASE_DIR/case.json" | tr -dc 0-9)
echo "the answer is ANSWER (run $seed)" > "$out/answer.md"
echo '{"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.001}' > "$out/usage.json"
"""

EVALBOT_TOML = """
[build]
setup = "true"
[run]
command = "CHAOS_SLEEP_S=@SLEEP@ sh agent.sh"
timeout_s = 60
[sandbox]
cpu = 1
memory_mb = 64
pids = 32
disk_mb = 8
"""

LLM_CRITERION = """
[[criteria]]
name = "quality"
grader = "llm"
description = "LLM judge: is the answer right?"
[criteria.params]
prompt = "Is the answer 42?"
"""


@dataclass(frozen=True)
class ChaosAgent:
    path: Path
    base: str
    head: str


def write_catalog(root: Path, *, cases: int = CASES, judged: bool = False) -> Path:
    world = root / "worlds" / "chaos"
    (world / "documents").mkdir(parents=True)
    (world / "world.toml").write_text('name = "chaos"\n')
    (world / "documents" / "fact.md").write_text("The answer is 42.\n")
    dataset = root / "datasets" / "chaos"
    dataset.mkdir(parents=True)
    (dataset / "dataset.toml").write_text('name = "chaos"\nworld = "chaos"\ndefault_trials = 2\n')
    for index in range(cases):
        case = dataset / "cases" / f"case-{index:02d}"
        case.mkdir(parents=True)
        criteria = (
            '[[criteria]]\nname = "accuracy"\ngrader = "contains_all"\n'
            'params = { values = ["answer is 42"] }\n'
        )
        (case / "case.toml").write_text(
            'prompt = "What is the answer?"\n\n' + criteria + (LLM_CRITERION if judged else "")
        )
    return root


def write_agent(path: Path, *, sleep_s: float = 0.3) -> ChaosAgent:
    path.mkdir(parents=True)
    init_repo(path)
    (path / "evalbot.toml").write_text(EVALBOT_TOML.replace("@SLEEP@", f"{sleep_s:g}"))
    commits = []
    for answer in ("41", "42"):
        (path / "agent.sh").write_text(AGENT.replace("ANSWER", answer))
        commits.append(commit_all(path, f"answers {answer}"))
    return ChaosAgent(path, commits[0], commits[1])


def plan(settings: Settings, agent: ChaosAgent, *, trials: int = TRIALS) -> ExperimentSpec:
    arms = [
        ArmSpec(name=BASE_ARM, ref="main", commit=agent.base),
        ArmSpec(name=HEAD_ARM, ref="refs/pull/1/head", commit=agent.head),
    ]
    return plan_experiment(
        settings, repo=str(agent.path), dataset="chaos", arms=arms, trials=trials
    )


def expected_status(run_id: str) -> RunStatus:
    case_id = run_id.split("/")[-3]
    return FAILING.get(case_id, RunStatus.SCORED)


# -- the worker subprocess --------------------------------------------------------------------


def settings_env(settings: Settings) -> dict[str, str]:
    """EVALBOT_* variables for every setting that differs from its default."""
    env: dict[str, str] = {}
    for path, variable, info in setting_fields():
        value: Any = settings
        for part in path.split("."):
            value = getattr(value, part)
        if value == info.get_default(call_default_factory=True) or value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        env[variable] = str(value)
    return env


class WorkerProcess:
    """`python -m bot worker` (all roles) in its own session, killed with SIGKILL on demand."""

    def __init__(
        self, settings: Settings, log: Path, extra_env: dict[str, str] | None = None
    ) -> None:
        self.settings = settings
        self.log = log
        self.extra_env = extra_env or {}  # e.g. EVALBOT_FAULT for a mutation check
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")}
        env |= settings_env(self.settings) | self.extra_env
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "worker"],
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL the worker's whole process group, as a crash or an OOM kill would."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


# -- the end-of-test checks -------------------------------------------------------------------


@dataclass
class Outcome:
    """What a fault test measured; recorded for the reliability table, then asserted."""

    cells: int
    stored: int
    lost: int
    duplicated: int  # from Temporal history and GitHub's request log (tests/chaos/evidence.py)
    misclassified: list[str]
    completed: bool
    comment_ok: bool
    check_run_ok: bool
    snapshot: HostSnapshot = field(default_factory=HostSnapshot)  # before the test's clean-up
    tolerated: tuple[str, ...] = ()  # kinds of snapshot item the fault may leave (worker kills)
    orphaned: list[str] = field(default_factory=list)  # what the test's clean-up then removed
    duplicate_detail: str = ""

    @property
    def residue(self) -> list[str]:
        """What the engine left on the host, as the snapshot saw it before any clean-up."""
        return [item for item in self.snapshot.items() if not item.startswith(self.tolerated)]

    def figures(self) -> dict[str, Any]:
        return {
            "experiments": 1,
            "completed": int(self.completed),
            "cells": self.cells,
            "lost": self.lost,
            "duplicated": self.duplicated,
            "misclassified": len(self.misclassified),
            "comment_ok": self.comment_ok and self.check_run_ok,
            "orphaned_sandboxes": len(self.orphaned),
            "host_residue": len(self.residue),
            "left_before_cleanup": len(self.snapshot.items()),
            "passed": not self.failures(),
        }

    def failures(self) -> list[str]:
        """Every check this outcome fails, in words (empty: it passes)."""
        checks = [
            (self.completed, "the experiment did not complete"),
            (self.lost == 0, f"{self.lost} results lost"),
            (self.duplicated == 0, f"{self.duplicated} duplicated ({self.duplicate_detail})"),
            (self.misclassified == [], f"misclassified: {self.misclassified[:5]}"),
            (self.stored == self.cells, f"{self.stored} stored of {self.cells}"),
            (self.comment_ok, "the PR comment does not show the stored results"),
            (self.check_run_ok, "the check run is not completed"),
            (self.residue == [], f"left on the host before clean-up: {self.residue[:5]}"),
        ]
        return [message for ok, message in checks if not ok]

    def check(self) -> None:
        assert self.failures() == [], self.failures()


async def executions_per_cell(
    client: Client, spec: ExperimentSpec, timeout_s: float = 30
) -> Counter[str]:
    """Visibility lags a little behind the workflows: wait until every cell is listed."""
    deadline = time.monotonic() + timeout_s
    while True:
        executions = await run_executions(client, spec.experiment_id)
        counts = Counter(run_id for _, run_ids in executions for run_id in run_ids)
        if len(counts) >= len(spec.cells()) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.5)


def misclassified(runs: list[RunResult], blob_dir: Path) -> list[str]:
    """Cells whose status is not the one the agent earned, or whose score or outputs are wrong."""
    wrong = []
    for run in runs:
        expected = expected_status(run.run_id)
        if run.status is not expected:
            wrong.append(f"{run.run_id}: {run.status} ({run.error}), expected {expected}")
        elif run.status is RunStatus.SCORED and not _scored_right(run, blob_dir):
            wrong.append(f"{run.run_id}: score {run.score} or its outputs are wrong")
    return wrong


def _scored_right(run: RunResult, blob_dir: Path) -> bool:
    answer = blob_dir / run.outputs_ref / "out" / "answer.md"  # a key in the local blob store
    head = run.arm == HEAD_ARM
    return (
        answer.is_file()
        and ("answer is 42" in answer.read_text()) == head
        and run.score == float(head)
    )


def expected_comment(spec: ExperimentSpec, runs: list[RunResult]) -> str:
    """The sticky comment's body once the experiment is final, rendered from the stored runs."""
    return rc.comment_body(spec, render_markdown(build_report(spec, runs)))


def reporter(repo: str, number: int, dataset: str = "chaos") -> dict[str, Any]:
    return {"kind": "github", "repo": repo, "number": number, "dataset": dataset}


def bot_comments(github: FakeGitHub, repo: str, number: int) -> list[dict[str, Any]]:
    return [c for c in github.comments_on(repo, number) if c["user"]["type"] == "Bot"]


async def outcome(
    client: Client,
    store: Store,
    github: FakeGitHub,
    spec: ExperimentSpec,
    where: tuple[str, int],
    *,
    completed: bool,
    snapshot: HostSnapshot,
    blob_dir: Path,
) -> Outcome:
    """The checks every fault test ends with. Duplicates are counted where they happen, not in
    the store (whose key keeps one row per cell whatever happened): cells whose run workflow was
    started twice, result-producing activity completions per cell in Temporal history, and
    sticky comments or check runs created more than once in GitHub's request log."""
    runs = await asyncio.to_thread(store.list_runs, spec.experiment_id)
    executions = await executions_per_cell(client, spec)
    completions = await completions_per_cell(client, spec.experiment_id)
    created = github_creations(github, *where, spec.experiment_id)
    cells = {c.run_id for c in spec.cells()}
    stored = Counter(r.run_id for r in runs)
    twice_started = sum(n - 1 for n in executions.values())
    twice_completed = sum(n - 1 for n in completions.values())
    comments = bot_comments(github, *where)
    checks = [c for c in github.check_runs_for(where[0]) if c["external_id"] == spec.experiment_id]
    return Outcome(
        cells=len(cells),
        stored=len(runs),
        lost=len(cells - set(stored)),
        duplicated=twice_started + twice_completed + created.duplicates(),
        duplicate_detail=f"{twice_started} workflows started twice, {twice_completed} results "
        f"produced twice in Temporal history, {created.comments} comments and "
        f"{created.check_runs} check runs created on GitHub",
        misclassified=misclassified(runs, blob_dir),
        completed=completed,
        comment_ok=[c["body"] for c in comments] == [expected_comment(spec, runs)],
        check_run_ok=[c["status"] for c in checks] == ["completed"],
        snapshot=snapshot,
    )


def leftover_sandboxes(settings: Settings) -> list[str]:
    """Sandboxes whose teardown never came (e.g. created by a provision the crash cut off)."""
    folder = settings.sandbox_dir
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


async def clean_up_sandboxes(settings: Settings) -> list[str]:
    """Terminate what was left (counted first); returns what was left: sandbox ids, and uid claims
    of sandboxes that never got a folder (freed by the provider's `reap_orphans(0)`). A sandbox
    cut off mid-create, before its metadata was written, is removed too (`remove_leftover`)."""
    left = leftover_sandboxes(settings)
    provider = create_provider(settings)
    for sandbox_id in left:
        with contextlib.suppress(SandboxError):  # counted as residue by host_residue
            await provider.remove_leftover(sandbox_id)
    # uids claimed by provisions cut off before the sandbox folder existed
    freed = provider.reap_orphans(0)
    return left + [f"uid claim {uid}" for uid in freed]


async def finish(
    worker: WorkerProcess, settings: Settings, experiment_id: str
) -> tuple[HostSnapshot, list[str]]:
    """End of a fault test: snapshot the host while the experiment's leftovers are still there,
    then stop the worker and clean up (returning what the clean-up removed)."""
    snapshot = snapshot_host(settings, experiment_id)
    worker.kill()
    return snapshot, await clean_up_sandboxes(settings)
