"""`execute` heartbeats in the background for as long as it runs, not only between polls: one
provider call (starting the runner on a loaded remote provider) may outlast the heartbeat timeout,
and a missed heartbeat fails a healthy run. (A 2,000-cell run on the Modal test server lost its
first 547 cells to "activity Heartbeat timeout" before this.)"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from tests.support.agent_repo import TINY_CATALOG
from workflows.engine import activities as activities_module
from workflows.engine.activities import RunActivities
from workflows.engine.types import ExecuteInput
from workflows.providers.base import (
    ResourceUsage,
    Sandbox,
    SandboxFileError,
    SandboxProvider,
    SandboxSpec,
)
from workflows.settings import Settings

START_S = 2.5  # longer than heartbeating's 2 s period: two beats at least while starting


class SlowStartSandbox:
    """Starting the runner takes START_S; then the runner has finished at once."""

    id = "sb-slow-start"

    def __init__(self, beats: list[tuple[Any, ...]]) -> None:
        self.beats = beats
        self.started_at: float | None = None
        self.beats_while_starting = 0

    async def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        if self.started_at is None:
            raise SandboxFileError(f"{path}: no such file")
        state = {"status": "finished", "started_at": self.started_at, "finished_at": time.time()}
        return json.dumps(state).encode()

    async def start(self, command: str, env: dict[str, str] | None = None) -> None:
        before = len(self.beats)
        await asyncio.sleep(START_S)
        self.beats_while_starting = len(self.beats) - before
        self.started_at = time.time()

    async def runner_alive(self) -> bool:
        return True

    async def usage(self) -> ResourceUsage:
        return ResourceUsage()


class OneSandboxProvider(SandboxProvider):
    name = "one"

    def __init__(self, sandbox: SlowStartSandbox) -> None:
        self.sandbox = sandbox

    async def create(self, spec: SandboxSpec) -> Sandbox:
        raise NotImplementedError

    async def attach(self, sandbox_id: str) -> Sandbox:
        assert sandbox_id == self.sandbox.id
        return self.sandbox  # type: ignore[return-value]

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        raise NotImplementedError


async def test_execute_heartbeats_while_the_runner_is_starting(tmp_path: Path) -> None:
    beats: list[tuple[Any, ...]] = []
    sandbox = SlowStartSandbox(beats)
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    activities = RunActivities(settings, OneSandboxProvider(sandbox), store=None, grader=None)  # type: ignore[arg-type]
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    result = await env.run(
        activities.execute, ExecuteInput(sandbox_id=sandbox.id, command="true", timeout_s=60)
    )

    assert result.state["status"] == "finished"
    assert sandbox.beats_while_starting >= 2
    assert set(beats) == {(sandbox.id,)}  # what a retry reattaches by


class RunningForAWhile(SlowStartSandbox):
    """A runner already started (a retried execute finds it), "running" for `polls` reads of
    its state, then "finished"."""

    def __init__(self, polls: int) -> None:
        super().__init__([])
        self.polls = polls
        self.started_at = time.time()

    async def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        self.polls -= 1
        if self.polls > 0:
            return json.dumps({"status": "running", "started_at": self.started_at}).encode()
        return await super().read_file(path, max_bytes)


class PollSleeps:
    """`asyncio` for the activities module, with its poll waits recorded and skipped (the
    heartbeat loop's own waits pass through: told apart by their caller, not by their length,
    so a poll wait as long as a heartbeat's is still recorded)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        caller = sys._getframe(1).f_code
        if caller.co_name == "beat" and caller.co_filename == activities_module.__file__:
            await asyncio.sleep(delay)
            return
        self.delays.append(delay)
        await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("sandbox_settings", "longest"),
    [
        ({"provider": "local"}, 1.0),
        ({"provider": "modal"}, 5.0),  # each poll of a Modal sandbox is four API calls
        ({"provider": "modal", "poll_interval_s": 0.5}, 0.5),
    ],
)
async def test_polls_back_off_to_the_providers_interval(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sandbox_settings: dict[str, Any],
    longest: float,
) -> None:
    sleeps = PollSleeps()
    monkeypatch.setattr(activities_module, "asyncio", sleeps)
    sandbox = RunningForAWhile(polls=14)
    settings = Settings(
        data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG, sandbox=sandbox_settings
    )
    activities = RunActivities(settings, OneSandboxProvider(sandbox), store=None, grader=None)  # type: ignore[arg-type]

    result = await ActivityEnvironment().run(
        activities.execute, ExecuteInput(sandbox_id=sandbox.id, command="true", timeout_s=600)
    )

    assert result.state["status"] == "finished"
    assert sleeps.delays[:3] == [0.02, 0.04, 0.08]  # quick runs are seen finishing quickly
    assert max(sleeps.delays) == longest == sleeps.delays[-1]
