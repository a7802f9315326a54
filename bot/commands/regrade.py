"""`evalbot regrade ID [--criteria a,b] [--dry-run] [--json]` — score stored outputs again.

The agent is not run: the outputs stored for each run are graded with the current rubric and
judge, changed grades are saved (Store.save_run replaces a run whose content differs), and the
diff between old and new grades is printed per criterion. Since the outputs did not change, any
difference is the ruler (rubric or judge), not the agent. Judge errors get their first grades.

Exit codes: 0 every regradable run was graded; 1 some could not be (they keep their old grades);
2 bad input (unknown experiment or criterion).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from bot import composition
from bot.commands.errors import CommandError, ExitCode, command_errors
from workflows.blobs import open_blob_store
from workflows.catalog.models import Dataset, ExperimentSpec
from workflows.engine.catalog_cache import CatalogCache
from workflows.engine.grading import CaseGrader
from workflows.engine.regrade_runs import (
    CriterionDiff,
    RegradeResult,
    VerdictChange,
    apply_updates,
    catalog_grader,
    regrade_runs,
    verdict_changes,
)
from workflows.records import RunResult
from workflows.report.checks import rubric_check
from workflows.report.report_models import RubricCheck
from workflows.scoring.rubric_hash import rubric_hashes
from workflows.settings import Settings
from workflows.store import Store

RULER_NOTE = (
    "The stored outputs did not change: every difference above is the ruler "
    "(rubric or judge), not the agent."
)


@click.command("regrade")
@click.argument("experiment_id")
@click.option(
    "--criteria", multiple=True, help="Only these criteria (comma-separated, repeatable)."
)
@click.option("--dry-run", is_flag=True, help="Show what would change; store nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
@command_errors
def regrade_command(
    settings: Settings, experiment_id: str, criteria: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Grade EXPERIMENT_ID's stored outputs again with the current rubric and judge."""
    names = [part.strip() for value in criteria for part in value.split(",") if part.strip()]
    store, spec = _load(settings, experiment_id)
    runs = store.list_runs(experiment_id)
    catalog = CatalogCache(Path(settings.catalog_root))
    dataset = catalog.dataset(spec.dataset)
    _check_criteria(dataset, names)
    result = _regrade(settings, store, catalog, spec, runs, names)
    if not dry_run:
        for run in result.updated:
            store.save_run(run)
    rubric = rubric_check(runs, rubric_hashes(dataset.cases))
    verdicts = verdict_changes(spec, runs, apply_updates(runs, result.updated))
    _print(result, verdicts, rubric, dry_run=dry_run, as_json=as_json)
    if result.failures:  # a result, not an error: the runs that failed are listed above
        sys.exit(ExitCode.COULD_NOT_RUN)


def _load(settings: Settings, experiment_id: str) -> tuple[Store, ExperimentSpec]:
    store = composition.open_store(settings)
    record = store.get_experiment(experiment_id)
    if record is None:
        raise CommandError.bad_input(f"no experiment '{experiment_id}'")
    return store, record.spec


def _check_criteria(dataset: Dataset, names: list[str]) -> None:
    known = {c.name for case in dataset.cases for c in case.rubric.criteria}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CommandError.bad_input(
            f"unknown criterion '{unknown[0]}' in dataset '{dataset.name}'; "
            f"known criteria: {', '.join(sorted(known))}"
        )


def _regrade(
    settings: Settings,
    store: Store,
    catalog: CatalogCache,
    spec: ExperimentSpec,
    runs: list[RunResult],
    names: list[str],
) -> RegradeResult:
    judge = composition.build_judge(settings, store)  # the cluster's judge rate
    try:
        blobs = open_blob_store(settings)
        grade = catalog_grader(catalog, spec.dataset, CaseGrader(judge), blobs)
        return regrade_runs(runs, grade, criteria=names or None, workers=settings.judge.concurrency)
    finally:
        if judge is not None:
            judge.close()


def _print(
    result: RegradeResult,
    verdicts: list[VerdictChange],
    rubric: RubricCheck,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    if as_json:
        click.echo(json.dumps(_as_json(result, verdicts, rubric, dry_run), indent=2))
        return
    for line in _text(result, verdicts, rubric, dry_run):
        click.echo(line)


def _as_json(
    result: RegradeResult, verdicts: list[VerdictChange], rubric: RubricCheck, dry_run: bool
) -> dict[str, Any]:
    data = result.model_dump(mode="json", exclude={"updated"})
    data["updated"] = [r.run_id for r in result.updated]
    data["saved"] = not dry_run
    data["verdict_changes"] = [v.model_dump(mode="json") for v in verdicts]
    data["rubric_changed_since_scoring"] = rubric.stale
    return data


def _text(
    result: RegradeResult, verdicts: list[VerdictChange], rubric: RubricCheck, dry_run: bool
) -> list[str]:
    recovered = f" ({len(result.recovered)} judge errors now graded)" if result.recovered else ""
    saved = "dry run, nothing saved" if dry_run else "saved"
    lines = [
        f"evalbot regrade {result.experiment_id}: {result.regraded} runs graded again{recovered}, "
        f"{len(result.updated)} with new grades ({saved})."
    ]
    if result.skipped:
        skipped = ", ".join(f"{status} {count}" for status, count in sorted(result.skipped.items()))
        lines.append(f"Not regradable (no gradable outputs): {skipped}.")
    if rubric.stale:
        lines.append(f"The rubric changed since these runs were scored: {', '.join(rubric.stale)}.")
    lines += ["", *_diff_table(result.criteria), ""]
    lines += [
        f"Verdict changed: {v.criterion} ({v.head} vs {v.base}): {v.before} → {v.after}"
        for v in verdicts
    ]
    if any(d.moved for d in result.criteria):
        lines.append(RULER_NOTE)
    if result.failures:
        lines.append(f"Could not regrade {len(result.failures)} runs (they keep their grades):")
        lines += [f"- {f.run_id}: {f.problem}" for f in result.failures[:50]]
    return lines


def _diff_table(diffs: list[CriterionDiff]) -> list[str]:
    rows = [
        "| criterion | runs | changed | ↑ | ↓ | mean before → after | newly scored "
        "| rubric changed |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for d in diffs:
        means = f"{_mean(d.mean_before)} → {_mean(d.mean_after)}"
        rows.append(
            f"| {d.criterion} | {d.compared} | {d.changed} | {d.up} | {d.down} | {means} "
            f"| {d.newly_scored} | {d.rubric_changed} |"
        )
    return rows


def _mean(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
