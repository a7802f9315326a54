"""A workflow that breaks the determinism rule (it reads the clock), for the test that shows the
sandboxed replay catches it. A module of its own: the sandbox re-imports it on replay."""

from __future__ import annotations

import time

from temporalio import workflow


@workflow.defn(name="ReadsTheClock")
class ReadsTheClock:
    @workflow.run
    async def run(self) -> float:
        return time.time()  # non-deterministic: a replay would compute another value
