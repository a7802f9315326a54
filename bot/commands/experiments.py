"""`evalbot run | status | results | rerun | worker | demo` — experiments from the command line.

Exit codes: 0 done (errored cells are part of a result, shown apart), 1 the experiment could not be
run or finish, 2 bad input (unknown dataset, bad flag), 4 the daily cap is spent (`run`, `rerun`);
failures are `CommandError`s (bot/commands/errors.py). `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import click

from bot import composition, demo, stopping
from bot.commands import demo_cli
from bot.commands.errors import CommandError, command_errors
from bot.commands.plan_flags import ExperimentFlags, experiment_options
from bot.commands.run_budget import budget_labels, estimate_line
from bot.doctor import sandbox_note
from bot.extra_workers import WorkersError, extra_workers
from bot.progress import ProgressDisplay
from bot.render import render_markdown
from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.labels import RERAN_AGENT_FAILURES
from workflows.catalog.loaders import load_dataset
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine import engine_client
from workflows.engine.planning import plan_experiment
from workflows.engine.telemetry import EngineMetrics
from workflows.experiment_budget import BudgetExhausted, rerun_terms
from workflows.outcomes import AGENT_FAILURES
from workflows.records import RunResult
from workflows.report import ExperimentReport, build_report
from workflows.report.cells_export import FORMATS, ExportError, Format, cell_rows, export_cells
from workflows.scoring.rubric_hash import rubric_hashes
from workflows.settings import Settings
from workflows.store import Store


@click.command("run")
@experiment_options
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-parallel", type=click.IntRange(1, 1000), help="Runs in flight at once.")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Stop starting cells once spent.")
@click.option("--trigger", default="cli", show_default=True, help="'main' for a main evaluation.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes on this machine, this one included (one per core is the most a "
    "machine uses; docs/engine.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@command_errors
def run_command(
    settings: Settings,
    flags: ExperimentFlags,
    seed: int,
    max_parallel: int | None,
    budget_usd: float | None,
    trigger: str,
    workers: int,
    as_json: bool,
) -> None:
    """Run DATASET for each arm and print the diff table (each arm against the first)."""
    spec = flags.plan(settings, seed=seed, trigger=trigger)
    store = composition.open_store(settings)
    labels = budget_labels(settings, store, flags.repo, budget_usd)
    spec = spec.model_copy(update={"labels": labels})
    max_parallel = max_parallel or default_parallelism(settings, workers)
    if not as_json:
        parallel = max_parallel or settings.sandbox.resolved_experiment_parallelism
        click.echo(f"estimate: {estimate_line(store, spec, parallel)}", err=True)
    try:
        report = asyncio.run(
            run_experiment(settings, store, spec, max_parallel, quiet=as_json, workers=workers)
        )
    except WorkersError as error:
        raise CommandError.could_not_run(str(error)) from None
    _print_report(report, as_json)
    if note := sandbox_note(settings):
        click.echo(f"sandbox: {note}", err=True)


async def run_experiment(
    settings: Settings,
    store: Store,
    spec: ExperimentSpec,
    max_parallel: int | None = None,
    *,
    quiet: bool = False,
    only_failed: bool = False,
    include_agent_failures: bool = False,
    workers: int = 1,
) -> ExperimentReport:
    """Start the experiment (or, with only_failed, rerun its cells lost to infrastructure, and
    the agent's failures too when asked), show progress until it ends, and build its report.
    With `workers` above 1, that many worker processes serve it, this one included."""
    spent_usd = 0.0
    if only_failed:  # the daily cap is checked before anything starts (BudgetExhausted)
        spec, spent_usd = rerun_terms(settings, store, spec)
        if include_agent_failures:
            spec = with_rerun_note(spec, store.list_runs(spec.experiment_id))
    metrics = EngineMetrics()
    async with (
        composition.session(settings, store, metrics=metrics) as active,
        extra_workers(settings, active.address, workers - 1) as extra,
    ):
        if only_failed:
            await engine_client.rerun_failed(
                active.client,
                settings,
                spec,
                spent_usd=spent_usd,
                include_agent_failures=include_agent_failures,
            )
        else:
            await engine_client.start_experiment(
                active.client, settings, spec, max_parallel=max_parallel
            )
        display = ProgressDisplay(spec.experiment_id, enabled=not quiet)
        with display:
            while True:
                progress = await engine_client.get_progress(active.client, spec.experiment_id)
                display.update(progress)
                if progress.done:
                    break
                await asyncio.sleep(0.5)
    if extra and not quiet:
        counts = [metrics.stored_runs(), *(worker.stored() for worker in extra)]
        shares = ", ".join("?" if count is None else str(count) for count in counts)
        click.echo(f"workers: {len(counts)} processes stored {shares} run results", err=True)
    return report_for(settings, store, spec)


def default_parallelism(settings: Settings, workers: int) -> int | None:
    """Runs in flight for `workers` processes: the default of one worker times their number
    (None: the engine's default, or the EVALBOT_EXPERIMENT_PARALLELISM set)."""
    if workers == 1 or settings.sandbox.experiment_parallelism > 0:
        return None
    return settings.sandbox.resolved_experiment_parallelism * workers


def with_rerun_note(spec: ExperimentSpec, runs: list[RunResult]) -> ExperimentSpec:
    """The spec with the count of agent failures rerun on request added to its label, so that
    every later report says their first results were replaced (workflows/report/build.py)."""
    rerun = sum(r.status in AGENT_FAILURES for r in runs)
    before = int(spec.labels.get(RERAN_AGENT_FAILURES, "0") or 0)
    labels = {**spec.labels, RERAN_AGENT_FAILURES: str(before + rerun)}
    return spec.model_copy(update={"labels": labels})


def report_for(settings: Settings, store: Store, spec: ExperimentSpec) -> ExperimentReport:
    """The experiment's report, noting criteria whose rubric changed in the catalog since."""
    try:
        cases = load_dataset(Path(settings.catalog_root), spec.dataset).cases
    except (CatalogError, UnknownNameError):
        cases = ()  # the dataset is gone or broken: report without the rubric check
    current = rubric_hashes(cases)
    return build_report(spec, store.list_runs(spec.experiment_id), current_rubric=current)


def _print_report(report: ExperimentReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        click.echo(render_markdown(report))


def _load(settings: Settings, experiment_id: str) -> tuple[Store, ExperimentSpec]:
    store = composition.open_store(settings)
    record = store.get_experiment(experiment_id)
    if record is None:
        known = [r.spec.experiment_id for r in store.list_experiments(limit=5)]
        hint = f"; recent: {', '.join(known)}" if known else ""
        raise CommandError.bad_input(f"no experiment '{experiment_id}'{hint}")
    return store, record.spec


@click.command("status")
@click.argument("experiment_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def status_command(settings: Settings, experiment_id: str, as_json: bool) -> None:
    """Show an experiment's state and its cells by outcome."""
    store, spec = _load(settings, experiment_id)
    record = store.get_experiment(experiment_id)
    counts = store.count_runs(experiment_id)
    total = len(spec.cells())
    status = {
        "experiment_id": experiment_id,
        "status": record.status if record else "unknown",
        "cells": total,
        "finished": sum(counts.values()),
        "by_status": counts,
    }
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none yet"
    click.echo(f"{experiment_id}: {status['status']}; {status['finished']}/{total} cells finished")
    click.echo(f"  results: {by_status}")


@click.command("results")
@click.argument("experiment_id")
@click.option("--json", "as_json", is_flag=True)
@click.option("--cells", is_flag=True, help="Export one row per run × criterion instead.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="csv",
    show_default=True,
    help="Format of --cells (parquet needs pyarrow: pip install 'evalbot[parquet]').",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write --cells to this file (needed for parquet); default stdout.",
)
@click.pass_obj
@command_errors
def results_command(
    settings: Settings,
    experiment_id: str,
    as_json: bool,
    cells: bool,
    fmt: Format,
    output: Path | None,
) -> None:
    """Print an experiment's diff table (partial while it is running), or with --cells its
    results as rows (docs/cli.md, "Cell export")."""
    store, spec = _load(settings, experiment_id)
    if cells:
        _export_cells(spec, store.list_runs(experiment_id), fmt, output)
        return
    report = report_for(settings, store, spec)
    _print_report(report, as_json)


def _export_cells(
    spec: ExperimentSpec, runs: list[RunResult], fmt: Format, output: Path | None
) -> None:
    if fmt == "parquet" and output is None:
        raise CommandError.bad_input("parquet is binary: name a file with --output")
    try:
        data = export_cells(cell_rows(spec, runs), fmt)
    except ExportError as error:
        raise CommandError.bad_input(str(error)) from None
    if output is None:
        click.echo(data.decode(), nl=False)
    else:
        output.write_bytes(data)


@click.command("rerun")
@click.argument("experiment_id")
@click.option("--failed", is_flag=True, help="Rerun the cells lost to infrastructure.")
@click.option(
    "--include-agent-failures",
    is_flag=True,
    help="Also rerun the agent's failures (crash, timeout, limits, no answer): they are results, "
    "so the report says they were replaced.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def rerun_command(
    settings: Settings,
    experiment_id: str,
    failed: bool,
    include_agent_failures: bool,
    as_json: bool,
) -> None:
    """Run a finished experiment's cells lost to infrastructure again; results are replaced."""
    if not failed:
        what = "--failed (the cells lost to infrastructure)"
        raise CommandError.bad_input(f"say what to rerun: {what}")
    store, spec = _load(settings, experiment_id)
    try:
        report = asyncio.run(
            run_experiment(
                settings,
                store,
                spec,
                quiet=as_json,
                only_failed=True,
                include_agent_failures=include_agent_failures,
            )
        )
    except BudgetExhausted as error:
        raise CommandError.over_budget(str(error)) from None
    _print_report(report, as_json)


@click.command("worker")
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(["runs", "collect", "score"]),
    help="Task-queue roles to serve (default: all).",
)
@click.option("--parent-pid", type=int, hidden=True, help="Stop when this process is gone.")
@click.pass_obj
@command_errors
def worker_command(settings: Settings, roles: tuple[str, ...], parent_pid: int | None) -> None:
    """Run workers against EVALBOT_TEMPORAL_ADDRESS (or, unset, the embedded dev server, which
    resumes any experiment left unfinished) until interrupted."""
    store = composition.open_store(settings)
    roles = roles or ("runs", "collect", "score")
    try:
        asyncio.run(_serve_workers(settings, store, roles, parent_pid))
    except KeyboardInterrupt:
        sys.exit(0)


async def _serve_workers(
    settings: Settings, store: Store, roles: tuple[str, ...], parent_pid: int | None = None
) -> None:
    """Serve until SIGTERM/SIGINT (or, with `parent_pid`, until that process is gone: the
    `evalbot run --workers` that started this one); then in-flight activities get
    temporal.graceful_shutdown_s, the embedded dev server and the spawner stop, and the command
    returns (docs/deploy.md)."""
    stop = stopping.stop_requested()
    if parent_pid is not None:
        stop_when_gone(parent_pid, stop)
    metrics = EngineMetrics()
    async with composition.session(settings, store, roles=roles, metrics=metrics) as active:
        where = "embedded dev server" if active.embedded else "cluster"
        click.echo(f"evalbot worker: serving {', '.join(roles)} on {active.address} ({where})")
        await stop.wait()
        grace = settings.temporal.graceful_shutdown_s
        click.echo(f"evalbot worker: stopping (in-flight activities get {grace:g} s)")
    stored = metrics.stored_runs()
    click.echo(f"evalbot worker: stopped; {stored} run result{'s' * (stored != 1)} stored here")


def stop_when_gone(parent_pid: int, stop: asyncio.Event) -> None:
    """Set `stop` when process `parent_pid` exits (a pidfd becomes readable), or now if it is
    already gone or no longer this process's parent (its pid reused)."""

    def gone() -> None:
        stop.set()
        click.echo(f"evalbot worker: process {parent_pid}, which started this worker, is gone")

    if os.getppid() != parent_pid:
        gone()
        return
    try:
        pidfd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        gone()
        return
    loop = asyncio.get_running_loop()

    def exited() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        gone()

    loop.add_reader(pidfd, exited)


COMMANDS: list[click.Command] = [
    run_command,
    status_command,
    results_command,
    rerun_command,
    worker_command,
]


@click.command("demo")
@click.option("--trials", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option(
    "--output",
    "--out",
    type=click.Path(path_type=Path),
    default=Path("demo-output"),
    show_default=True,
    help="Folder for the results (a new demo-<time> folder inside it), under the current one.",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    help="Only this case of `bar` (ID or tag:T; repeatable): a smaller demo.",
)
@click.option(
    "--history/--no-history",
    default=True,
    show_default=True,
    help="Also record a short history of main (3 small main evaluations) for the dashboard.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (notes on stderr).")
@click.pass_obj
@command_errors
def demo_command(
    settings: Settings,
    trials: int,
    output: Path,
    cases: tuple[str, ...],
    history: bool,
    as_json: bool,
) -> None:
    """Evaluate the sample legal agent: main vs a PR branch, dataset `bar`, on this machine.
    Runs from any folder: the agent, dataset and world ship with evalbot."""
    matter = demo.demo_matter()
    settings = settings.with_changes(catalog_root=matter.catalog_root)
    spec_cases = list(cases)
    folder = demo.output_folder(output.resolve())
    repo = folder / "agent-repo"
    base, head = demo.build_demo_repo(matter, repo)
    click.echo(f"demo: agent repository {repo} (main {base[:8]}, pr {head[:8]})", err=as_json)
    arms = [
        ArmSpec(name="main", ref="main", commit=base),
        ArmSpec(name="pr", ref="pr", commit=head),
    ]
    spec = plan_experiment(
        settings,
        repo=str(repo),
        dataset=matter.dataset,
        arms=arms,
        trials=trials,
        case_selectors=spec_cases,
    )
    store = composition.open_store(settings)
    report = asyncio.run(run_experiment(settings, store, spec, quiet=as_json))
    markdown = render_markdown(report)
    _print_report(report, as_json)
    if note := sandbox_note(settings):  # the report says which guarantees were weaker
        markdown += f"\n\n> **Sandbox:** {note}\n"
        click.echo(f"\nsandbox: {note}", err=as_json)
    demo.write_results(folder, markdown, report.model_dump(mode="json"))
    click.echo(f"\ndemo: report.md and results.json are in {folder}", err=as_json)
    if history:
        demo_cli.record_demo_history(
            settings,
            repo,
            base,
            spec_cases,
            lambda s: run_experiment(settings, store, s, quiet=True),
        )
    demo_cli.print_dashboard(settings, spec.experiment_id, matter.dataset, err=as_json)


COMMANDS.append(demo_command)
