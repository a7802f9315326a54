"""The LLM judge fails while a 200-cell experiment is graded.

1. For 15 s (from a seeded random point) the judge server answers 500s and lets requests time
   out, alternately: the judge client's retries absorb it, so the experiment completes with
   exactly one result per cell, each with the judge's real verdict (none a zero for an outage),
   and the PR comment shows the results.
2. A judge that is down for good: every answered cell ends as `judge_error` (an infrastructure
   error, never a score of zero), the agents' own failures keep their class, and `evalbot regrade`
   once the judge is back gives those cells their grades — still one result per cell.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.composition import open_store
from tests.chaos.conftest import PR, REPO, chaos_settings
from tests.chaos.evidence import completions_per_cell, judge_requests_per_answer
from tests.chaos.harness import (
    ChaosAgent,
    WorkerProcess,
    expected_status,
    finish,
    outcome,
    plan,
    reporter,
    settings_env,
    write_catalog,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.experiments import wait_stored
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, start_experiment, wait_for
from workflows.engine.planning import plan_experiment
from workflows.records import RunResult, RunStatus
from workflows.settings import Settings

SEED = 4242
OUTAGE_S = 15.0
API_KEY = "sk-chaos"
ANSWER = re.compile(r"<answer>(.*)</answer>", re.DOTALL)


def right_answer(user_message: str) -> tuple[float, str]:
    found = ANSWER.search(user_message)
    if found and "answer is 42" in found.group(1):
        return 1.0, "The answer is 42."
    return 0.0, "The answer is not 42."


class FailingJudge(FakeOpenAI):
    """The fake judge, failing on demand: while `down_until` is ahead, each request gets a 500
    or, alternately, no answer before the client's time-out."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(api_key=API_KEY, verdict=right_answer)
        self.timeout_s = timeout_s
        self.down_until = 0.0
        self.failed = 0

    def outage(self, seconds: float) -> None:
        self.down_until = time.monotonic() + seconds

    def _next(self) -> Reply | None:
        scripted = super()._next()
        if time.monotonic() >= self.down_until:
            return scripted
        self.failed += 1
        if self.failed % 2:
            return Reply(status=500)
        return Reply(delay_s=self.timeout_s + 1)


@pytest.fixture
def judge() -> Iterator[FailingJudge]:
    server = FailingJudge(timeout_s=2).start()
    yield server
    server.stop()


def judge_settings(settings: Settings, judge: FakeOpenAI, attempts: int) -> Settings:
    return settings.with_changes(
        judge={
            "base_url": judge.base_url,
            "api_key": API_KEY,
            "rate_per_s": 0,
            "timeout_s": 2,
            "max_attempts": attempts,
            "concurrency": 8,
        }
    )


def judged_right(run: RunResult) -> bool:
    """The quality criterion has the judge's real verdict (1 for head's 42, 0 for base's 41)."""
    quality = next((c for c in run.criteria if c.name == "quality"), None)
    return quality is not None and quality.score == (1.0 if run.arm == "head" else 0.0)


@pytest.mark.timeout(420)
async def test_judge_outage_is_absorbed(
    agent: ChaosAgent,
    github: FakeGitHub,
    judge: FailingJudge,
    temporal_server: DevServer,
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    write_catalog(tmp_path / "catalog", judged=True)
    settings = judge_settings(
        chaos_settings(tmp_path, temporal_server.address, github), judge, attempts=8
    )  # backoff before the 6th attempt >= 15.5 s: a 15 s outage is always outlasted
    spec = plan(settings, agent)
    cells = len(spec.cells())
    store = open_store(settings)
    client = await connect(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    completed = False
    try:
        await start_experiment(client, settings, spec, reporter=reporter(REPO, PR), max_parallel=50)
        started_at = await wait_stored(store, spec.experiment_id, rng.randrange(20, cells // 2))
        judge.outage(OUTAGE_S)
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=300)
        completed = True
    finally:
        snapshot, left = await finish(worker, settings, spec.experiment_id)
    result = await outcome(
        client,
        store,
        github,
        spec,
        (REPO, PR),
        completed=completed,
        snapshot=snapshot,
        blob_dir=settings.blob_dir,
    )
    result.orphaned = left
    scored = [r for r in store.list_runs(spec.experiment_id) if r.status is RunStatus.SCORED]
    misjudged = [r.run_id for r in scored if not judged_right(r)]

    record(
        "fault",
        f"LLM judge 500s and time-outs for {OUTAGE_S:.0f} s",
        faults_injected=1,
        **result.figures(),
        detail=f"outage from result {started_at} of {cells}; {judge.failed} judge requests "
        f"failed; {len(misjudged)} runs misjudged",
    )
    assert judge.failed >= 8  # the outage was felt, not skipped
    assert misjudged == []
    result.check()


@pytest.mark.timeout(300)
async def test_judge_down_for_good_then_regraded(
    agent: ChaosAgent, github: FakeGitHub, temporal_server: DevServer, tmp_path: Path
) -> None:
    write_catalog(tmp_path / "catalog", judged=True)
    dead = FakeOpenAI().start()
    dead.stop()  # a judge URL nobody answers on
    settings = judge_settings(
        chaos_settings(tmp_path, temporal_server.address, github), dead, attempts=2
    )
    arms = [
        ArmSpec(name="base", ref="main", commit=agent.base),
        ArmSpec(name="head", ref="refs/pull/1/head", commit=agent.head),
    ]
    spec = plan_experiment(
        settings,
        repo=str(agent.path),
        dataset="chaos",
        arms=arms,
        trials=3,
        case_selectors=["case-02", "case-03", "case-07"],
    )
    store = open_store(settings)
    client = await connect(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        await start_experiment(client, settings, spec, max_parallel=20)
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=180)
    finally:
        snapshot, _ = await finish(worker, settings, spec.experiment_id)
    before = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    completions = await completions_per_cell(client, spec.experiment_id)

    judge = FakeOpenAI(api_key=API_KEY, verdict=right_answer).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOT_")}
        env |= settings_env(judge_settings(settings, judge, attempts=2))
        regrade = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "bot", "regrade", spec.experiment_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        judge.stop()
    after = store.list_runs(spec.experiment_id)

    judge_errors = [r for r in before.values() if r.status is RunStatus.JUDGE_ERROR]
    judged = judge_requests_per_answer(judge)  # regrade: each judge_error cell judged once
    duplicated = sum(n - 1 for n in completions.values()) + sum(n - 1 for n in judged.values())
    wrong_after = [r.run_id for r in after if r.status is not expected_status(r.run_id)]
    record(
        "fault",
        "LLM judge down for good, then regrade",
        faults_injected=1,
        experiments=1,
        completed=1,
        cells=len(spec.cells()),
        lost=len({c.run_id for c in spec.cells()} - {r.run_id for r in after}),
        duplicated=duplicated,
        misclassified=len(wrong_after),
        left_before_cleanup=len(snapshot.items()),
        detail=f"{len(judge_errors)} cells judge_error (never 0), all graded by regrade; "
        f"{sum(judged.values())} judge requests for them",
    )
    assert regrade.returncode == 0, regrade.stderr
    assert snapshot.items() == [], snapshot.items()
    assert duplicated == 0 and sorted(completions.values()) == [1] * len(spec.cells())
    assert sum(judged.values()) == len(judge_errors), judged
    assert sorted(before) == sorted(c.run_id for c in spec.cells())
    for run in before.values():  # the judge's outage is the judge's, never the agent's
        if expected_status(run.run_id) is RunStatus.SCORED:
            assert run.status is RunStatus.JUDGE_ERROR and run.score is None, run
            assert "judge unavailable" in run.error
        else:
            assert run.status is expected_status(run.run_id), run
    assert len(judge_errors) == 6
    assert sorted(r.run_id for r in after) == sorted(before)
    assert wrong_after == []
    assert all(judged_right(r) for r in after if r.status is RunStatus.SCORED)
