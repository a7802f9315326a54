"""Stage activities of a run: provision → execute → collect → score, teardown always.

Activities are methods of classes that receive their dependencies (settings, provider, store,
catalog) from the worker. Each is idempotent: a retry after a crash repeats or resumes the stage
without changing the outcome.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from workflows import __version__, faults
from workflows.blobs import BlobStore, open_blob_store
from workflows.catalog.catalog_errors import CatalogError
from workflows.catalog.hashing import tree_hashes
from workflows.catalog.models import Case, ExperimentSpec, World
from workflows.engine.catalog_cache import CatalogCache
from workflows.engine.classify import classify
from workflows.engine.collect import collect_outputs
from workflows.engine.repos import RepoError, agent_config_at, local_repo
from workflows.engine.telemetry import EngineMetrics, timed
from workflows.engine.types import (
    CollectInput,
    CollectResult,
    ExecuteInput,
    ExecuteResult,
    PreparedArm,
    PrepareInput,
    ProvisionResult,
    PublishReportInput,
    RecordErrorInput,
    RunInput,
    RunSummary,
    ScoreInput,
    ShortRunInput,
    collect_input,
    execute_input,
    summarize,
)
from workflows.outcomes import AGENT_FAILURES, Outcome, build_failed, outcome_of
from workflows.providers.base import (
    HostUnsupported,
    ResourceLimits,
    Sandbox,
    SandboxError,
    SandboxFileError,
    SandboxNotFound,
    SandboxProvider,
    SandboxRateLimited,
    SandboxSpec,
)
from workflows.providers.modal.modal_cost import sandbox_usage
from workflows.records import CriterionScore, RunResult, RunStatus, weighted_score
from workflows.redaction import Redactor
from workflows.scoring import JudgeUnavailable, RubricError, failed_criteria
from workflows.secret_store import SecretStoreError
from workflows.settings import Settings
from workflows.store.store_errors import StoreError, StoreRefused

STATE_FILE = "/out/.state.json"
HOST_TIMEOUT_GRACE_S = 30
RUNNER_LOST = "RunnerLost"
HOST_UNSUPPORTED = "HostUnsupported"  # the provider cannot run on this host at all
STORE_OUTAGE_S = 600  # how long `score` waits for the store to come back
STORE_REFUSED = "StoreRefused"  # the error type of a run the store will not take
# the Temporal run of the workflow that provisioned a sandbox: only that run resumes in it
WORKFLOW_RUN_LABEL = "workflow_run"


class RunStore(Protocol):
    """What the activities need from the store (workflows.store.Store implements it)."""

    def save_run(self, result: RunResult) -> bool: ...
    def get_run(self, run_id: str) -> RunResult | None: ...
    def list_runs(self, experiment_id: str) -> list[RunResult]: ...
    def save_experiment(self, spec: ExperimentSpec, status: str = "running") -> bool: ...
    def set_experiment_status(self, experiment_id: str, status: str) -> bool: ...


class Grader(Protocol):
    def __call__(self, case: Case, outputs_dir: Path, world: World) -> list[CriterionScore]: ...


class SecretResolver(Protocol):
    def __call__(self, groups: tuple[str, ...]) -> dict[str, str]: ...


@contextlib.asynccontextmanager
async def heartbeating(*details: Any, every_s: float = 2.0) -> AsyncIterator[None]:
    """Heartbeat in the background while a long step runs, so a dead worker is noticed fast.
    Nothing to do in a local activity: those have no heartbeats."""
    if activity.info().is_local:
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat(*details)
            await asyncio.sleep(every_s)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def heartbeat(*details: Any) -> None:
    """Heartbeat a regular activity; local activities have no heartbeats (their workflow task
    is kept alive instead), so this is a no-op in them."""
    if not activity.info().is_local:
        activity.heartbeat(*details)


class RunActivities:
    def __init__(
        self,
        settings: Settings,
        provider: SandboxProvider,
        store: RunStore,
        grader: Grader,
        *,
        catalog: CatalogCache | None = None,
        secrets: SecretResolver | None = None,
        blobs: BlobStore | None = None,
        host_queue: str = "",
        metrics: EngineMetrics | None = None,
    ) -> None:
        """`metrics`: the worker's (docs/deploy.md, "Metrics"); unset, a registry nobody reads."""
        self.settings = settings
        self.metrics = metrics or EngineMetrics()
        self.provider = provider
        self.store = store
        self.grader = grader
        self.catalog = catalog or CatalogCache(Path(settings.catalog_root))
        self.secrets = secrets
        self.blobs = blobs or open_blob_store(settings)
        self._image_locks: dict[str, asyncio.Lock] = {}
        # this host's task queue when host affinity is on and sandboxes live on the host
        # (docs/engine.md, "Host queues"); "" otherwise
        self.host_queue = host_queue if host_queue and provider.host_bound else ""
        self._host_images: dict[tuple[str, str], str] = {}
        # collect and score as local activities share the runs worker: bound them as their own
        # workers would (a regular activity already holds one of its worker's slots)
        self._collect_slots = asyncio.Semaphore(settings.sandbox.collect_slots)
        self._score_slots = asyncio.Semaphore(settings.sandbox.max_concurrent_score)
        # on a host queue every stage starts at once (a wait in the queue reads as a lost host):
        # agents wait for one of the host's run slots inside `execute` instead
        self._agent_slots = asyncio.Semaphore(settings.sandbox.worker_run_slots)

    # -- prepare (once per arm) ---------------------------------------------------------------

    @activity.defn(name="prepare_arm")
    async def prepare_arm(self, job: PrepareInput) -> PreparedArm:
        """Build the arm's commit once and read its evalbot.toml once, for all its runs."""
        repo = await asyncio.to_thread(local_repo, job.repo, self.settings.data_dir / "repos")
        try:
            config = await asyncio.to_thread(agent_config_at, repo, job.commit)
        except (RepoError, CatalogError) as error:
            message = build_failed(job.commit, str(error))
            return PreparedArm(image="", command="", timeout_s=0, limits={}, error=message)
        async with heartbeating("prepare"):
            image = await self._image(repo, job.commit, config.build.setup)
        limits = ResourceLimits(
            cpu=config.sandbox.cpu,
            memory_mb=config.sandbox.memory_mb,
            pids=config.sandbox.pids,
            disk_mb=config.sandbox.disk_mb,
            wall_timeout_s=config.run.timeout_s,
        )
        local_stages = self._local_stages(config.run.timeout_s)
        return PreparedArm(
            image=image,
            command=config.run.command,
            timeout_s=config.run.timeout_s,
            limits=limits.as_dict(),
            secrets=list(config.sandbox.secrets),
            allow_domains=list(config.sandbox.allow_domains),
            quick_provision=self.provider.quick_provision,
            local_stages=local_stages,
            one_stage=local_stages and not self.host_queue,
        )

    def _local_stages(self, timeout_s: int) -> bool:
        """Short runs on a provider that creates sandboxes in milliseconds run every stage as a
        local activity: retried per stage all the same, without a task-queue round trip each."""
        limit = self.settings.sandbox.local_stage_max_s
        return self.provider.quick_provision and 0 < timeout_s <= limit

    # -- provision ----------------------------------------------------------------------------

    @activity.defn(name="provision")
    @timed("provision")
    async def provision(self, run: RunInput) -> ProvisionResult:
        return await self._provision(run, await self.provider.sandboxes_of(run.cell.run_id))

    async def _provision(self, run: RunInput, leftovers: list[str]) -> ProvisionResult:
        """A fresh sandbox for the run, once `leftovers` (its sandboxes an earlier attempt made
        and never tore down: its worker died first) are removed."""
        began = time.monotonic()  # provisioning latency, stored with the run (bot/metrics.py)
        case = self.catalog.case(run.dataset, run.cell.case_id)
        world = self.catalog.world(case.world)
        arm = run.prepared
        spec = SandboxSpec(
            run_id=run.cell.run_id,
            image=arm.image,
            world_dir=world.path,
            case_files={"case.json": self._case_json(run, case)},
            limits=ResourceLimits(**arm.limits),
            env=self._secret_env(tuple(arm.secrets), run),
            allow_domains=tuple(arm.allow_domains),
            labels={
                "experiment": run.cell.experiment_id,
                "run": run.cell.run_id,
                WORKFLOW_RUN_LABEL: activity.info().workflow_run_id or "",
            },
            secret_groups=self._secret_groups(tuple(arm.secrets), run),
        )
        if self.host_queue:  # the arm was built on whichever host ran prepare_arm
            spec = replace(spec, image=await self._host_image(run))
        await self._remove_leftovers(leftovers)
        sandbox = await self._create(spec)
        provision_s = round(time.monotonic() - began, 3)
        return self._provisioned(run, sandbox.id, world.version, provision_s)

    def _provisioned(
        self, run: RunInput, sandbox_id: str, world_version: str, provision_s: float | None
    ) -> ProvisionResult:
        arm = run.prepared
        return ProvisionResult(
            sandbox_id=sandbox_id,
            provider=self.provider.name,
            host_queue=self.host_queue,
            image=arm.image,
            command=arm.command,
            timeout_s=arm.timeout_s,
            world_version=world_version,
            limits=arm.limits,
            provision_s=provision_s,
        )

    async def _host_image(self, run: RunInput) -> str:
        """The arm's image on this host: `prepare_arm` built it on one host only, so another
        builds it once (then from its cache) before its first sandbox of the arm."""
        key = (run.repo, run.commit)
        if key not in self._host_images:
            repo = await asyncio.to_thread(local_repo, run.repo, self.settings.data_dir / "repos")
            try:
                config = await asyncio.to_thread(agent_config_at, repo, run.commit)
            except (RepoError, CatalogError) as error:
                message = build_failed(run.commit, str(error))
                raise ApplicationError(message, type="BuildFailed", non_retryable=True) from None
            self._host_images[key] = await self._image(repo, run.commit, config.build.setup)
        return self._host_images[key]

    async def _image(self, repo: Path, commit: str, setup: str) -> str:
        lock = self._image_locks.setdefault(f"{repo}@{commit}", asyncio.Lock())
        async with lock:
            try:
                return await self.provider.build_image(repo, commit, setup)
            except HostUnsupported as error:  # the host's fault, not the commit's: stop early
                self.metrics.provider_error(self.provider.name, error)
                raise ApplicationError(
                    str(error), type=HOST_UNSUPPORTED, non_retryable=True
                ) from None
            except SandboxError as error:
                message = build_failed(commit, str(error))
                raise ApplicationError(message, type="BuildFailed", non_retryable=True) from None

    async def _attached(self, sandbox_id: str) -> Sandbox | None:
        try:
            return await self.provider.attach(sandbox_id)
        except SandboxNotFound:
            return None

    async def _terminate_leftovers(self, run_id: str) -> None:
        await self._remove_leftovers(await self.provider.sandboxes_of(run_id))

    async def _remove_leftovers(self, sandbox_ids: list[str]) -> None:
        for sandbox_id in sandbox_ids:
            activity.logger.warning("terminating %s, left over from an earlier attempt", sandbox_id)
            await self.provider.remove_leftover(sandbox_id)

    async def _create(self, spec: SandboxSpec) -> Sandbox:
        try:
            return await self.provider.create(spec)
        except SandboxError as error:
            self.metrics.provider_error(self.provider.name, error)
            message = f"sandbox creation failed: {error}"
            kind = "SandboxRateLimited" if isinstance(error, SandboxRateLimited) else "SandboxError"
            raise ApplicationError(message, type=kind) from None

    @staticmethod
    def _case_json(run: RunInput, case: Case) -> bytes:
        payload = {
            "id": case.id,
            "prompt": case.prompt,
            "attachments": list(case.attachments),
            "world": case.world,
            "arm": {"name": run.cell.arm, "commit": run.commit, "config": run.arm_config},
            "trial": run.cell.trial,
            "seed": run.cell.seed,
        }
        return json.dumps(payload, indent=2).encode()

    def _secret_groups(self, groups: tuple[str, ...], run: RunInput) -> tuple[str, ...]:
        """Providers holding the secrets themselves (Modal) get the group names, only those the
        run may receive."""
        if not self.provider.injects_secret_groups:
            return ()
        return permitted_groups(groups, run)

    def _secret_env(self, groups: tuple[str, ...], run: RunInput) -> dict[str, str]:
        groups = permitted_groups(groups, run)
        if not groups or self.secrets is None or self.provider.injects_secret_groups:
            return {}
        try:
            return self.secrets(groups)
        except SecretStoreError as error:  # configuration, not a transient fault: do not retry
            raise ApplicationError(str(error), type="SecretsMissing", non_retryable=True) from None

    # -- execute ----------------------------------------------------------------------------

    @activity.defn(name="execute")
    @timed("execute")
    async def execute(self, job: ExecuteInput) -> ExecuteResult:
        """Start the runner (or reattach to it after a retry) and poll its state file.
        Heartbeats in the background throughout, not only between polls: one provider call
        (starting the runner, a read on a loaded remote provider) may outlast the heartbeat
        timeout, which would otherwise fail a healthy run (a 2,000-cell run on the Modal test
        server lost its first 547 cells that way)."""
        async with heartbeating(job.sandbox_id):
            sandbox = await self._attach(job.sandbox_id)
            state = await read_state(sandbox)
            if state is None:
                async with self._agent_slot():
                    await sandbox.start(job.command, job.env)
                    return await self._poll(sandbox, job, time.time())
            if state.get("status") == "running" and not await sandbox.runner_alive():
                self.metrics.provider_error(self.provider.name, RUNNER_LOST)
                raise ApplicationError("the runner died", type=RUNNER_LOST, non_retryable=True)
            started = float(state.get("started_at") or time.time())
            return await self._poll(sandbox, job, started)

    @contextlib.asynccontextmanager
    async def _agent_slot(self) -> AsyncIterator[None]:
        """One of this host's run slots while a new agent runs, when stages come by host queue
        (elsewhere the worker's activity slots bound the agents)."""
        if not self.host_queue:
            yield
            return
        await self._agent_slots.acquire()  # execute heartbeats meanwhile
        try:
            yield
        finally:
            self._agent_slots.release()

    async def _poll(self, sandbox: Sandbox, job: ExecuteInput, started: float) -> ExecuteResult:
        delay = 0.02
        deadline = started + job.timeout_s + HOST_TIMEOUT_GRACE_S
        while True:
            heartbeat(job.sandbox_id)
            state = await read_state(sandbox)
            if state is not None and state.get("status") == "finished":
                return ExecuteResult(state=state, usage=asdict(await sandbox.usage()))
            if state is not None and not await sandbox.runner_alive():
                state = await read_state(sandbox)  # it may have finished in between
                if state is None or state.get("status") != "finished":
                    self.metrics.provider_error(self.provider.name, RUNNER_LOST)
                    raise ApplicationError("the runner died", type=RUNNER_LOST, non_retryable=True)
                continue
            if time.time() > deadline:
                await sandbox.terminate()
                usage = asdict(await sandbox.usage())
                return ExecuteResult(state=state or {}, usage=usage, host_timeout=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.settings.sandbox.resolved_poll_interval_s)

    async def _attach(self, sandbox_id: str) -> Sandbox:
        try:
            return await self.provider.attach(sandbox_id)
        except SandboxNotFound as error:
            self.metrics.provider_error(self.provider.name, error)
            raise ApplicationError(
                f"sandbox {sandbox_id} is gone", type=RUNNER_LOST, non_retryable=True
            ) from None

    # -- collect ----------------------------------------------------------------------------

    @activity.defn(name="collect")
    @timed("collect")
    async def collect(self, job: CollectInput) -> CollectResult:
        sandbox = await self._attach(job.sandbox_id)
        world = self.catalog.world(self.catalog.case(job.dataset, job.case_id).world)
        originals = self.catalog.world_hashes(world)
        staging = await asyncio.to_thread(self.blobs.staging, job.run_id)
        async with self._collect_slots, heartbeating("collect"):
            collected = await collect_outputs(sandbox, staging, originals)
            key = await asyncio.to_thread(self._redact_and_commit, job.run_id, staging)
        return CollectResult(
            outputs_ref=key,  # a key in the blob store, never a host path
            usage=collected.usage,
            has_answer=collected.has_answer,
            notes=collected.notes,
        )

    def _redact_and_commit(self, run_id: str, staging: Path) -> str:
        """No secret value reaches a blob: redact the staged outputs, then store them."""
        Redactor.from_settings(self.settings).redact_tree(staging)
        return self.blobs.commit(run_id, staging)

    # -- score ------------------------------------------------------------------------------

    @activity.defn(name="score")
    async def score(self, job: ScoreInput) -> RunSummary:
        async with self._score_slots, heartbeating("score"):  # retried in seconds after a crash
            return await self._score(job)

    async def _score(self, job: ScoreInput) -> RunSummary:
        status, reason = classify(
            job.execute.state,
            job.execute.usage,
            host_timeout=job.execute.host_timeout,
            has_answer=job.collect.has_answer,
        )
        if status is RunStatus.SCORED:
            criteria, status, reason = await self._grade(job)
        else:
            criteria = self._failed_criteria(job.run, status, reason)
            if faults.active("errors-as-infra"):  # a broken build for the mutation checks only
                status = RunStatus.SANDBOX_ERROR
        result = self._result(job.run, job.provision, status, reason).model_copy(
            update={
                "criteria": criteria,
                "score": weighted_score(criteria) if criteria else None,
                "usage": job.collect.usage,
                "wall_s": _wall_seconds(job.execute.state),
                "exit_code": job.execute.state.get("exit_code"),
                "outputs_ref": job.collect.outputs_ref,
                "sandbox": sandbox_usage(
                    job.execute.usage, self.settings.sandbox.prices.get(job.provision.provider, {})
                ),
            }
        )
        if status is RunStatus.SCORED or not faults.active("drop-errors"):  # (a broken build)
            await self._save(result)
        return summarize(result)

    async def _save(self, result: RunResult) -> None:
        """Save a graded run, waiting out a store outage (a database restart or failover) for up
        to STORE_OUTAGE_S: stage retries alone last ~15 s, after which a run that scored would
        be recorded as a sandbox error. A store that refuses the run (StoreRefused: its
        experiment is not saved, say) fails the stage at once, without retries."""
        deadline, delay = time.monotonic() + STORE_OUTAGE_S, 0.5
        while True:
            try:
                if await asyncio.to_thread(self.store.save_run, result):
                    self.metrics.run_stored(result)
                return
            except StoreRefused as error:
                raise ApplicationError(str(error), type=STORE_REFUSED, non_retryable=True) from None
            except StoreError as error:
                if time.monotonic() + delay > deadline:
                    raise
                activity.logger.warning("the store is unavailable, retrying: %s", error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _grade(self, job: ScoreInput) -> tuple[tuple[CriterionScore, ...], RunStatus, str]:
        case = self.catalog.case(job.run.dataset, job.run.cell.case_id)
        world = self.catalog.world(case.world)
        try:
            scores = await asyncio.to_thread(self._grade_key, case, job.collect.outputs_ref, world)
        except JudgeUnavailable as error:  # the judge could not answer: regrade later
            return (), RunStatus.JUDGE_ERROR, f"judge unavailable: {error}"
        except RubricError as error:  # the rubric cannot be applied: fix it, then regrade
            return (), RunStatus.JUDGE_ERROR, f"rubric error: {error}"
        except Exception as error:  # a grader that cannot grade is never a zero for the agent
            return (), RunStatus.JUDGE_ERROR, f"grading failed: {error}"
        return tuple(scores), RunStatus.SCORED, ""

    def _grade_key(self, case: Case, key: str, world: World) -> list[CriterionScore]:
        """Grade the outputs under `key`, on a local copy of them while grading lasts."""
        with self.blobs.local_copy(key) as outputs:
            return self.grader(case, outputs, world)

    def _result(
        self, run: RunInput, provision: ProvisionResult | None, status: RunStatus, error: str
    ) -> RunResult:
        cell = run.cell
        return RunResult(
            run_id=cell.run_id,
            experiment_id=cell.experiment_id,
            case_id=cell.case_id,
            arm=cell.arm,
            trial=cell.trial,
            seed=cell.seed,
            status=status,
            error=error,
            provider=provision.provider if provision else self.provider.name,
            image=provision.image if provision else run.prepared.image,
            commit=run.commit,
            limits=provision.limits if provision else run.prepared.limits,
            world_version=provision.world_version if provision else "",
            evalbot_version=__version__,
            provision_s=provision.provision_s if provision else None,
        )

    def _failed_criteria(
        self, run: RunInput, status: RunStatus, reason: str
    ) -> tuple[CriterionScore, ...]:
        """A failure the agent caused scores every criterion at its floor (workflows/outcomes.py);
        an infrastructure failure scores nothing: it is excluded."""
        if outcome_of(status) is not Outcome.FAILED:
            return ()
        try:
            case = self.catalog.case(run.dataset, run.cell.case_id)
        except CatalogError:  # the case is gone: the run still counts, at FAILURE_SCORE overall
            return ()
        return tuple(failed_criteria(case, f"{status.value}: {reason}"))

    # -- a short run in one stage ----------------------------------------------------------

    @activity.defn(name="finish_short_run")
    async def finish_short_run(self, job: ShortRunInput) -> RunSummary:
        """Execute, collect and score a short run as one local activity of its workflow: each
        keeps its own work, timing and limits, and a retry of the three after a failure
        reattaches to the finished runner, collects again and stores the same result
        (docs/engine.md, "One stage for a short run")."""
        executed = await self.execute(execute_input(job.provision))
        collected = await self.collect(collect_input(job.run, job.provision))
        return await self.score(ScoreInput(job.run, job.provision, executed, collected))

    # -- a short cell in one stage ---------------------------------------------------------

    @activity.defn(name="run_short_cell")
    async def run_short_cell(self, run: RunInput) -> RunSummary:
        """Every stage of a short run as one local activity (docs/engine.md, "One stage for a
        short cell"): provision, execute, collect and score (finish_short_run), teardown. A
        failed attempt leaves its sandbox for the next, which resumes in it when its runner has
        started (finished, or still running), so the agent runs once; the workflow removes what
        is left after the last attempt."""
        leftovers = await self.provider.sandboxes_of(run.cell.run_id)  # listed once, here
        provision = await self._resumable(run, leftovers)
        if provision is None:
            with self.metrics.stage("provision"):  # as @timed times the provision activity
                provision = await self._provision(run, leftovers)
        summary = await self.finish_short_run(ShortRunInput(run, provision))
        await self.teardown(provision.sandbox_id, run.cell.run_id)
        return summary

    async def _resumable(self, run: RunInput, leftovers: list[str]) -> ProvisionResult | None:
        """The one of `leftovers` an earlier attempt of this run, in this workflow run, left with
        its runner started: its state file says finished, or the runner is alive. Any other (one
        a rerun of the cell finds, say) is provision's to remove."""
        workflow_run = activity.info().workflow_run_id or ""
        for sandbox_id in leftovers:
            sandbox = await self._attached(sandbox_id)
            if sandbox is None or sandbox.labels.get(WORKFLOW_RUN_LABEL) != workflow_run:
                continue
            state = await read_state(sandbox)
            if state is None:
                continue
            if state.get("status") == "finished" or await sandbox.runner_alive():
                activity.logger.info("resuming in %s, left by an earlier attempt", sandbox_id)
                case = self.catalog.case(run.dataset, run.cell.case_id)
                world = self.catalog.world(case.world)
                return self._provisioned(run, sandbox_id, world.version, provision_s=None)
        return None

    @activity.defn(name="record_error")
    async def record_error(self, job: RecordErrorInput) -> RunSummary:
        status = RunStatus(job.status)
        result = self._result(job.run, job.provision, status, job.error)
        criteria = self._failed_criteria(job.run, status, job.error)
        if criteria:
            result = result.model_copy(
                update={"criteria": criteria, "score": weighted_score(criteria)}
            )
        async with heartbeating("record_error"):
            if await asyncio.to_thread(self.store.save_run, result):
                self.metrics.run_stored(result)
        return summarize(result)

    # -- teardown ---------------------------------------------------------------------------

    @activity.defn(name="teardown")
    @timed("teardown")
    async def teardown(self, sandbox_id: str, run_id: str = "") -> None:
        """Remove the run's sandbox, and on a host-bound provider any other sandbox of the run
        here: one an attempt of `provision` made after it was superseded (its task given again
        while it still ran, as after a Temporal server restart), which nothing else would tear
        down until the reaper's pass. `run_id` is empty from workflows started before it was
        passed; `sandbox_id` is empty when the workflow never learnt it (a short cell's one
        stage failed: whatever its attempts left is removed by run id)."""
        if faults.active("skip-teardown"):  # a broken build for the mutation checks only
            return
        async with heartbeating("teardown"):  # on a host queue: a dead host is noticed fast
            sandbox = await self._attached(sandbox_id) if sandbox_id else None
            if sandbox is not None:
                await sandbox.terminate()
            if run_id and self.provider.host_bound:  # a directory listing; on Modal an API call
                await self._terminate_leftovers(run_id)


class ExperimentActivities:
    """Experiment-level bookkeeping in the store."""

    def __init__(self, store: RunStore, metrics: EngineMetrics | None = None) -> None:
        self.store = store
        self.metrics = metrics or EngineMetrics()

    @activity.defn(name="save_experiment")
    async def save_experiment(self, spec: ExperimentSpec) -> None:
        async with heartbeating("save_experiment"):
            new = await asyncio.to_thread(self.store.save_experiment, spec, "running")
        if new:  # once per experiment: a retried attempt finds it stored
            self.metrics.experiments_started.inc()

    @activity.defn(name="finish_experiment")
    async def finish_experiment(self, experiment_id: str, status: str) -> None:
        async with heartbeating("finish_experiment"):
            changed = await asyncio.to_thread(
                self.store.set_experiment_status, experiment_id, status
            )
        if changed:  # a retried attempt finds the status already set
            self.metrics.experiments_finished.labels(status).inc()

    @activity.defn(name="failed_cells")
    async def failed_cells(
        self, experiment_id: str, include_agent_failures: bool = False
    ) -> list[str]:
        """Cells a rerun runs again: infrastructure failures, and the agent's failures only when
        asked (they are results, workflows/outcomes.py)."""
        async with heartbeating("failed_cells"):
            runs = await asyncio.to_thread(self.store.list_runs, experiment_id)
        return [r.run_id for r in runs if rerunnable(r.status, include_agent_failures)]


class ReportActivities(abc.ABC):
    """Publishing an experiment's phases to whoever asked for a report (ExperimentInput.reporter):
    the engine defines the activity, and the bot implements `publish`
    (bot/github/github_activities.py, GitHubReporter) and registers `publish_report` with its
    workers.

    Defined here rather than named by a string shared with the bot: the workflow calls it by
    reference like every other stage (layering forbids importing the bot), its name exists once,
    and mypy checks the bot's implementation against this signature."""

    @activity.defn(name="publish_report")
    async def publish_report(self, job: PublishReportInput) -> None:
        async with heartbeating("publish_report"):  # a crashed worker's publish is retried soon
            await asyncio.to_thread(self.publish, job)

    @abc.abstractmethod
    def publish(self, job: PublishReportInput) -> None:
        """Post the phase (blocking: it runs in a thread); idempotent, since it may be retried."""


def permitted_groups(groups: tuple[str, ...], run: RunInput) -> tuple[str, ...]:
    """The arm's secret groups this run may receive: all of them, or for a fork PR only those in
    `run.secret_groups_allowed` (its dataset's fork-safe groups)."""
    allowed = run.secret_groups_allowed
    return groups if allowed is None else tuple(g for g in groups if g in allowed)


def rerunnable(status: RunStatus, include_agent_failures: bool) -> bool:
    if outcome_of(status) is Outcome.EXCLUDED:
        return True
    return include_agent_failures and status in AGENT_FAILURES


async def read_state(sandbox: Sandbox) -> dict[str, Any] | None:
    try:
        raw = await sandbox.read_file(STATE_FILE, max_bytes=64 * 1024)
    except SandboxFileError:
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None  # being rewritten or tampered with; the next poll decides
    return state if isinstance(state, dict) else None


def _wall_seconds(state: dict[str, Any]) -> float:
    started, finished = state.get("started_at"), state.get("finished_at")
    if isinstance(started, int | float) and isinstance(finished, int | float):
        return max(0.0, float(finished) - float(started))
    return 0.0


__all__ = [
    "ExperimentActivities",
    "ReportActivities",
    "RunActivities",
    "heartbeating",
    "read_state",
    "tree_hashes",
]
