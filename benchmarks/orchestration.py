"""Orchestration benchmark: 100 cases × 4 arms × 5 trials = 2,000 cells with a trivial agent on the
`process` provider (or `--provider local`: bubblewrap, cgroups and a loop disk per sandbox, with a
per-stage table of where a sandbox's time goes), through a real Temporal dev server and the real
engine (every stage a separate, separately retried activity).

Prints wall time, cells per second and Temporal history events per cell, for evalbot's engine and,
on the same dev server in the same run, for the naive design (one child workflow per cell with five
sequential trivial activities; benchmarks/naive_baseline.py) — the ratio is the figure to compare,
because these machines are shared and noisy. Usage:

    .venv/bin/python benchmarks/orchestration.py [--cases 100 --arms 4 --trials 5] [--workers 1]
        [--provider process|local] [--mkfs-per-sandbox] [--warm-pool 0]
        [--local-stage-max-s 120] [--workflow-sandbox] [--floor] [--parallelism 0]
        [--run-batch 10] [--skip-baseline] [--memory] [--sandbox-dir DIR]

`--workers N` adds N-1 `evalbot worker` processes (the scale-out path of docs/engine.md) beside the
benchmark's in-process worker; a Python worker uses one core at most. `--local-stage-max-s 0` runs
every stage as a regular activity (the placement long runs and Modal get). `--workflow-sandbox`
runs both designs' workflows in Temporal's sandbox (EVALBOT_WORKFLOW_SANDBOX). `--floor` also times
the naive design with local activities, a workflow per cell and as many cells per workflow as
evalbot's batches, with the five stages and with a short run's three (execute, collect and score in
one): evalbot's Temporal work per cell without any of the run's own work (sandbox, agent, collect,
grading, store), and this process's CPU per cell for it. `--parallelism` is the experiment's runs
in flight (EVALBOT_EXPERIMENT_PARALLELISM; 0 = the engine's default, twice the run slots).
`--run-batch` is how many short cells one RunBatchWorkflow runs (EVALBOT_RUN_BATCH_SIZE; 1 = one
RunWorkflow per cell). Modal through the engine is benchmarks/modal_engine.py (the Modal test
server, with Modal's start latency and rate limits): `--provider modal` says so and stops.
`--memory` prints the peak RSS of this process, the extra workers and the dev server while the
experiment runs (benchmarks/memory_sampler.py) and the largest workflow history.
`--sandbox-dir DIR` puts the sandboxes (only) in a fresh folder in DIR (EVALBOT_SANDBOX_DIR,
e.g. on tmpfs); the store, blobs and dev server stay in the temporary folder.
`--mkfs-per-sandbox` (local) formats each sandbox's disk with its own mkfs.ext4, as before disk
templates (workflows/providers/local/disk.py), for before/after rows in one run."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import naive_baseline
from bench_figures import commit, host, load
from memory_sampler import Peaks, largest_history, sampled
from stage_table import stage_lines
from temporalio.client import Client
from trivial_matter import write_agent, write_catalog

from bot.composition import open_store
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.embedded import engine_session
from workflows.engine.engine_client import run_executions, start_experiment, wait_for
from workflows.engine.grading import CaseGrader
from workflows.engine.planning import plan_experiment
from workflows.engine.workflows import batch_size
from workflows.providers import create_provider
from workflows.providers.base import SandboxProvider
from workflows.providers.local import LocalProvider
from workflows.providers.local.stage_timer import StageTimer
from workflows.settings import SandboxSettings, Settings
from workflows.store import Store


async def history_events_per_cell(
    client: Client, experiment_id: str, workflow_ids: list[str], cells: int
) -> float:
    """(The parent's events + the run workflows' events, from a sample of 40) per cell."""
    sample = random.Random(0).sample(workflow_ids, k=min(40, len(workflow_ids)))
    child = [len((await client.get_workflow_handle(w).fetch_history()).events) for w in sample]
    parent = len((await client.get_workflow_handle(experiment_id).fetch_history()).events)
    return (statistics.mean(child) * len(workflow_ids) + parent) / cells


@dataclass
class NaiveRun:
    """The naive design on the same server as evalbot's run, with as many worker processes, the
    same workflow runner and as many cells in flight."""

    client: Client
    address: str
    cells: int
    workers: int
    sandboxed: bool
    parallel: int


@dataclass(frozen=True)
class Floor:
    wall_s: float
    events: float  # history events per cell
    cpu_ms: float  # this process's CPU per cell (its worker; not the extra worker processes)


async def naive(
    run: NaiveRun, local: bool = False, batch: int = 1, stages: tuple[str, ...] = ()
) -> Floor:
    """The naive design's figures. `local`: its stages as local activities, `batch` cells to a
    child workflow (the floor of evalbot's placement: the same Temporal work per cell, none of
    the run's); `stages`: other stage names than the naive design's five."""
    queue = f"naive-floor-{batch}-{len(stages)}" if local else "naive-baseline"
    script = str(Path(naive_baseline.__file__))
    sandboxed = ["sandboxed"] if run.sandboxed else []
    command = [sys.executable, script, run.address, queue, *sandboxed]
    with processes(command, run.workers - 1, dict(os.environ)):
        async with naive_baseline.worker(run.client, queue, run.sandboxed):
            started, cpu = time.perf_counter(), time.process_time()
            await run.client.execute_workflow(
                naive_baseline.NaiveExperimentWorkflow.run,
                args=[run.cells, queue, run.parallel, local, batch, list(stages) or None],
                id=queue,
                task_queue=queue,
            )
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    child_ids = [f"{queue}/{i}" for i in range(0, run.cells, batch)]
    events = await history_events_per_cell(run.client, queue, child_ids, run.cells)
    return Floor(elapsed, events, 1000 * cpu / run.cells)


@contextlib.contextmanager
def processes(
    command: list[str], count: int, env: dict[str, str], log: Path | None = None
) -> Iterator[None]:
    """`count` copies of a worker process for the block's duration."""
    with open(log or os.devnull, "ab") as output:
        started = [
            subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
            for _ in range(count)
        ]
    try:
        time.sleep(3 if started else 0)  # let them connect and poll before the experiment starts
        yield
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=60)


def worker_env(settings: Settings, address: str) -> dict[str, str]:
    """What an `evalbot worker` needs to serve the benchmark's experiment."""
    return {
        **os.environ,
        "EVALBOT_TEMPORAL_ADDRESS": address,
        "EVALBOT_DATA_DIR": str(settings.data_dir),
        "EVALBOT_CATALOG_ROOT": str(settings.catalog_root),
        "EVALBOT_PROVIDER": settings.sandbox.provider,
        "EVALBOT_ALLOW_PROCESS_PROVIDER": "true",
        "EVALBOT_MAX_CONCURRENT_RUNS": str(settings.sandbox.max_concurrent_runs),
        "EVALBOT_MAX_CONCURRENT_COLLECT": str(settings.sandbox.max_concurrent_collect),
        "EVALBOT_MAX_CONCURRENT_SCORE": str(settings.sandbox.max_concurrent_score),
        "EVALBOT_POLL_INTERVAL_S": str(settings.sandbox.resolved_poll_interval_s),
        "EVALBOT_LOCAL_STAGE_MAX_S": str(settings.sandbox.local_stage_max_s),
        "EVALBOT_RUN_BATCH_SIZE": str(settings.sandbox.run_batch_size),
        "EVALBOT_WORKFLOW_SANDBOX": str(settings.temporal.workflow_sandbox).lower(),
        "EVALBOT_SANDBOX_DIR": str(settings.sandbox_dir),
    }


def cpu_seconds() -> float:
    own, helpers = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + helpers.ru_utime + helpers.ru_stime


async def main(options: argparse.Namespace) -> None:
    cases, arms, trials = options.cases, options.arms, options.trials
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="evalbot-bench-")))
        sandboxes = root / "state" / "sandboxes"  # the default, in the data folder
        if options.sandbox_dir:  # a fresh folder there, of this run alone
            scratch = tempfile.TemporaryDirectory(prefix="evalbot-bench-", dir=options.sandbox_dir)
            sandboxes = Path(stack.enter_context(scratch))
        write_catalog(root / "catalog", cases)
        commits = write_agent(root / "agent", arms)
        settings = Settings(
            data_dir=root / "state",
            catalog_root=root / "catalog",
            sandbox={
                "provider": options.provider,
                "allow_process_provider": True,
                "max_concurrent_runs": 64,
                "max_concurrent_collect": 32,
                "max_concurrent_score": 32,
                "experiment_parallelism": options.parallelism,
                "poll_interval_s": 0.2,
                "local_stage_max_s": options.local_stage_max_s,
                "run_batch_size": options.run_batch,
                "warm_pool_size": options.warm_pool,
                "sandbox_dir": sandboxes,
            },
            temporal={"workflow_sandbox": options.workflow_sandbox},
        )
        store = open_store(settings)
        arm_specs = [ArmSpec(name=f"arm{i}", ref=c, commit=c) for i, c in enumerate(commits)]
        spec = plan_experiment(
            settings, repo=str(root / "agent"), dataset="bench", arms=arm_specs, trials=trials
        )
        provider = create_provider(settings)
        timer = StageTimer()
        if isinstance(provider, LocalProvider):
            provider.timer = timer  # the in-process worker's sandboxes (all of them at --workers 1)
            if options.mkfs_per_sandbox:  # the path before disk templates, for before/after rows
                provider.disk_templates = None
        print(f"before: {load()}", flush=True)
        memory = sampled() if options.memory else contextlib.nullcontext(None)
        with memory as peaks:
            await measured(options, settings, spec, provider, store, timer, peaks)


async def measured(
    options: argparse.Namespace,
    settings: Settings,
    spec: ExperimentSpec,
    provider: SandboxProvider,
    store: Store,
    timer: StageTimer,
    peaks: Peaks | None,
) -> None:
    """Run the experiment (and the baselines asked for) and print the figures."""
    cases, arms, trials = options.cases, options.arms, options.trials
    baseline = not options.skip_baseline
    async with engine_session(settings, provider, store, CaseGrader()) as session:
        env = worker_env(settings, session.address)
        command = [sys.executable, "-m", "bot", "worker"]
        with processes(command, options.workers - 1, env, settings.data_dir.parent / "workers.log"):
            started, cpu_before = time.perf_counter(), cpu_seconds()
            await start_experiment(session.client, settings, spec)
            progress = await wait_for(session.client, spec.experiment_id)
            elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_before
        if peaks is not None:
            peaks.stop.set()  # the experiment's peaks, not the history reads' or baselines'
        run_ids = [c.run_id for c in spec.cells()]
        executions = await run_executions(session.client, spec.experiment_id)
        if peaks is not None:
            sample = random.Random(1).sample(executions, k=min(40, len(executions)))
            largest = await largest_history(
                session.client, [spec.experiment_id, *(w for w, _ in sample)]
            )
        events = await history_events_per_cell(
            session.client, spec.experiment_id, [w for w, _ in executions], len(run_ids)
        )
        if isinstance(provider, LocalProvider) and provider.pool is not None:
            await provider.pool.drain()  # its shells are mounted disks: none left behind
        naive_run = NaiveRun(
            session.client,
            session.address,
            len(run_ids),
            options.workers,
            settings.temporal.workflow_sandbox,
            settings.sandbox.resolved_experiment_parallelism,
        )
        batch = batch_size(settings.sandbox.run_batch_size, naive_run.parallel)
        shapes = [(1, naive_baseline.STAGES), (batch, naive_baseline.STAGES)]
        shapes.append((batch, naive_baseline.SHORT_RUN_STAGES))  # a short run's stages today
        floors = [(b, s, await naive(naive_run, True, b, s)) for b, s in shapes if options.floor]
        if baseline:
            naive_figures = await naive(naive_run)
    counts = store.count_runs(spec.experiment_id)
    cells = len(run_ids)
    print(f"machine: {host()}; commit {commit()}; after: {load()}")
    print(
        f"cells: {cells} ({cases} cases x {arms} arms x {trials} trials), "
        f"provider {options.provider}"
    )
    placement = (
        "one local activity (run_short_cell)" if options.local_stage_max_s else "regular activities"
    )
    runner = "sandboxed" if settings.temporal.workflow_sandbox else "unsandboxed"
    print(
        f"worker processes: {options.workers}; a short run's stages as {placement}; "
        f"{runner} workflow runner (both designs); {len(executions)} run workflows "
        f"(up to {max(len(runs) for _, runs in executions)} cells each)"
    )
    print(f"stored results: {sum(counts.values())} {dict(counts)}; scored {progress.scored}")
    print(f"cells in flight: {naive_run.parallel} (both designs)")
    print(f"wall time: {elapsed:.1f} s")
    print(f"cells per second: {cells / elapsed:.1f}")
    print(
        f"worker CPU per cell (this process + the helpers it waited for, e.g. mkfs, mount; "
        f"not the detached runners): {1000 * cpu / cells:.1f} ms"
    )
    print(f"history events per cell: {events:.1f}")
    for size, stages, floor in floors:
        print(
            f"floor ({size} cell(s) per child workflow, {len(stages)} local activities each "
            f"({', '.join(stages)}), no work): {floor.wall_s:.1f} s, "
            f"{cells / floor.wall_s:.1f} cells/s, {floor.events:.1f} events/cell, "
            f"{floor.cpu_ms:.1f} ms of this process's CPU per cell"
        )
    if baseline:
        print(
            f"naive baseline (5 sequential trivial activities per child, same server and "
            f"worker processes): "
            f"{naive_figures.wall_s:.1f} s, {cells / naive_figures.wall_s:.1f} cells/s, "
            f"{naive_figures.events:.1f} events/cell"
        )
        print(f"ratio naive / evalbot wall time: {naive_figures.wall_s / elapsed:.2f}")
    if peaks is not None:
        print("\n".join(peaks.lines()))
        name, largest_events, largest_bytes = largest
        print(
            f"largest workflow history (the experiment's and 40 sampled run workflows'): "
            f"{name}: {largest_events} events, {largest_bytes / 1024:.0f} KiB"
        )
    if timer.samples:
        print("\n".join(["per-stage time of a local sandbox:", *stage_lines(timer, cells)]))


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--arms", type=int, default=4)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--provider", choices=["process", "local", "modal"], default="process")
    parser.add_argument("--mkfs-per-sandbox", action="store_true")
    parser.add_argument("--warm-pool", type=int, default=0, help="EVALBOT_WARM_POOL_SIZE (local)")
    parser.add_argument("--local-stage-max-s", type=int, default=120)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--workflow-sandbox", action="store_true")
    parser.add_argument("--floor", action="store_true")
    parser.add_argument(
        "--memory", action="store_true", help="peak RSS of the workers and the dev server"
    )
    parser.add_argument("--parallelism", type=int, default=0)
    parser.add_argument(
        "--sandbox-dir", help="EVALBOT_SANDBOX_DIR: the sandboxes in a fresh folder in this one"
    )
    parser.add_argument(
        "--run-batch", type=int, default=SandboxSettings.model_fields["run_batch_size"].default
    )
    return parser


if __name__ == "__main__":
    parsed = argument_parser().parse_args()
    if parsed.provider == "modal":
        sys.exit(
            "--provider modal: run benchmarks/modal_engine.py (the engine on the Modal test "
            "server, with Modal's start latency and rate limits)"
        )
    asyncio.run(main(parsed))
