"""A run whose workflow the worker drops (evicted from its cache, or the worker stopping) has its
coroutine closed mid-stage: it must not try to schedule its teardown then — nothing can be
scheduled outside the workflow's event loop, and the replay that resumes the run tears down.

Broken build caught: a `finally` that always awaits the teardown (Python then reports "Exception
ignored in: <coroutine object run_cell>" with "Not in workflow event loop" when the coroutine is
collected)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.experiments import run_input
from workflows.catalog.models import CellRef
from workflows.engine import workflows
from workflows.engine.types import ProvisionResult

PROVISIONED = ProvisionResult("sb-1", "process", "img", "true", 60, "w1", {})


def fake_stages(called: list[str], pending: asyncio.Future[Any]) -> Any:
    async def stage(options: Any, activity: Any, *args: Any, **kwargs: Any) -> Any:
        called.append(activity.__name__)
        if activity.__name__ == "provision":
            return PROVISIONED
        return await pending  # execute: the run is mid-stage when its coroutine is closed

    return stage


def test_a_closed_run_schedules_no_teardown(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.new_event_loop()
    try:
        called: list[str] = []
        monkeypatch.setattr(workflows, "stage", fake_stages(called, loop.create_future()))
        cell = CellRef(experiment_id="exp", case_id="c", arm="main", trial=0, seed=0)
        run = workflows.run_cell(run_input(cell))
        run.send(None)  # provision, then suspended in execute
        assert called == ["provision", "execute"]

        run.close()  # what the SDK does to an evicted workflow's coroutines

        assert called == ["provision", "execute"]  # no teardown scheduled
    finally:
        loop.close()
