"""The hand-off from the web process to Temporal.

`Launcher` is what the webhook handlers call; none of its methods waits for an experiment to run.
`TemporalLauncher` is the real one: it wraps `workflows.engine.engine_client` and connects on first
use.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from temporalio.client import Client, WorkflowFailureError
from temporalio.runtime import Runtime

from bot.identity import parse_experiment_id
from workflows.catalog.models import ExperimentSpec
from workflows.engine import engine_client as engine
from workflows.engine.types import Progress
from workflows.experiment_budget import rerun_terms
from workflows.settings import Settings
from workflows.store import Store

EXPERIMENT_WORKFLOW = "ExperimentWorkflow"


class LaunchError(RuntimeError):
    """A request the engine cannot carry out as asked; `str()` is one sentence for the user."""


class Launcher(Protocol):
    async def start(self, spec: ExperimentSpec, reporter: dict[str, Any]) -> str:
        """Start the experiment (idempotent by `spec.experiment_id`); return its id."""

    async def cancel(self, experiment_id: str) -> bool:
        """Ask a running experiment to stop; False when it is not running."""

    async def rerun(self, experiment_id: str, reporter: dict[str, Any]) -> str:
        """Run a finished experiment's failed cells again; LaunchError if running or unknown."""

    async def status(self, experiment_id: str) -> Progress | None:
        """Cells by state; None when there is no such experiment."""

    async def find(self, prefix: str, *, running_only: bool = True) -> list[str]:
        """Ids of PR experiments whose id starts with `prefix`."""


class TemporalLauncher:
    """`Launcher` on a Temporal cluster, through the engine's client functions."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: Client | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        """`client` unset: connect to EVALBOT_TEMPORAL_ADDRESS on first use (with `runtime`, the
        composition root's, so the core's logs go through logging)."""
        self._settings = settings
        self._store = store
        self._client = client
        self._runtime = runtime
        self._lock = asyncio.Lock()

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                self._client = await engine.connect(self._settings, runtime=self._runtime)
            return self._client

    async def start(self, spec: ExperimentSpec, reporter: dict[str, Any]) -> str:
        return await engine.start_experiment(
            await self.client(), self._settings, spec, reporter=reporter
        )

    async def cancel(self, experiment_id: str) -> bool:
        return await engine.cancel_experiment(await self.client(), experiment_id)

    async def rerun(self, experiment_id: str, reporter: dict[str, Any]) -> str:
        client = await self.client()
        record = await asyncio.to_thread(self._store.get_experiment, experiment_id)
        if record is None:
            raise LaunchError(f"there is no record of experiment {experiment_id}")
        try:
            if await engine.is_running(client, experiment_id):
                raise LaunchError(f"experiment {experiment_id} is still running")
        except engine.ExperimentNotFound:
            pass  # known to the store but gone from Temporal (retention): start it afresh
        spec, spent_usd = await asyncio.to_thread(
            rerun_terms, self._settings, self._store, record.spec
        )  # BudgetExhausted when the repository's daily cap is spent
        return await engine.start_experiment(
            client, self._settings, spec, reporter=reporter, only_failed=True, spent_usd=spent_usd
        )

    async def status(self, experiment_id: str) -> Progress | None:
        try:
            return await engine.get_progress(await self.client(), experiment_id)
        except (engine.ExperimentNotFound, engine.ExperimentFailed, WorkflowFailureError):
            return None

    async def find(self, prefix: str, *, running_only: bool = True) -> list[str]:
        query = (
            f'WorkflowId STARTS_WITH "{engine.quoted(prefix)}" '
            f'AND WorkflowType = "{EXPERIMENT_WORKFLOW}"'
        )
        if running_only:
            query += ' AND ExecutionStatus = "Running"'
        client = await self.client()
        found = {w.id async for w in client.list_workflows(query)}
        return sorted(i for i in found if parse_experiment_id(i) is not None)
