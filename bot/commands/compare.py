"""`evalbot compare A[:ARM] B[:ARM]` — any two experiments' arms, paired by case id.

ARM defaults to each experiment's last arm (the head). The comparison is built like an
experiment's own report (workflows.report.build_report): a virtual two-arm experiment over the cases
both ran, A's arm as the baseline. Exit codes: 0 compared, 2 unknown experiment or arm, or no case
in common, 1 the store could not be read.
"""

from __future__ import annotations

import json

import click

from bot import composition
from bot.commands.errors import CommandError, command_errors
from bot.render import render_markdown
from workflows.catalog.models import ArmSpec, CellRef, ExperimentSpec
from workflows.records import RunResult
from workflows.report import ExperimentReport, build_report
from workflows.settings import Settings
from workflows.store import Store


def _pick(store: Store, reference: str) -> tuple[ExperimentSpec, ArmSpec]:
    experiment_id, _, arm_name = reference.partition(":")
    record = store.get_experiment(experiment_id)
    if record is None:
        raise CommandError.bad_input(f"no experiment '{experiment_id}'")
    spec = record.spec
    if not arm_name:
        return spec, spec.arms[-1]
    for arm in spec.arms:
        if arm.name == arm_name:
            return spec, arm
    names = ", ".join(a.name for a in spec.arms)
    raise CommandError.bad_input(
        f"experiment '{experiment_id}' has no arm '{arm_name}'; its arms: {names}"
    )


def _renamed(run: RunResult, spec: ExperimentSpec, arm: str) -> RunResult:
    cell = CellRef(experiment_id=spec.experiment_id, case_id=run.case_id, arm=arm,
                   trial=run.trial, seed=run.seed)  # fmt: skip
    return run.model_copy(
        update={"run_id": cell.run_id, "experiment_id": spec.experiment_id, "arm": arm}
    )


def compare_experiments(store: Store, a_ref: str, b_ref: str) -> ExperimentReport:
    """A's arm (named `a`) as the baseline, B's arm (named `b`) as the head, paired by case."""
    spec_a, arm_a = _pick(store, a_ref)
    spec_b, arm_b = _pick(store, b_ref)
    common = [c for c in spec_a.case_ids if c in set(spec_b.case_ids)]
    if not common:
        raise CommandError.bad_input(
            f"'{spec_a.experiment_id}' and '{spec_b.experiment_id}' share no case"
        )
    spec = ExperimentSpec(
        experiment_id=f"compare-{spec_a.experiment_id}-{spec_b.experiment_id}",
        repo=spec_b.repo,
        dataset=spec_b.dataset,
        case_ids=tuple(common),
        arms=(
            arm_a.model_copy(update={"name": "a"}),
            arm_b.model_copy(update={"name": "b"}),
        ),
        trials=max(spec_a.trials, spec_b.trials),
        trigger="compare",
        labels={
            "a": f"{spec_a.experiment_id}:{arm_a.name}",
            "b": f"{spec_b.experiment_id}:{arm_b.name}",
        },
    )
    wanted = set(common)
    runs = [
        _renamed(r, spec, "a")
        for r in store.list_runs(spec_a.experiment_id)
        if r.arm == arm_a.name and r.case_id in wanted
    ] + [
        _renamed(r, spec, "b")
        for r in store.list_runs(spec_b.experiment_id)
        if r.arm == arm_b.name and r.case_id in wanted
    ]
    return build_report(spec, runs)


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.pass_obj
@command_errors
def compare_command(settings: Settings, a: str, b: str, as_json: bool) -> None:
    """Compare experiment A's arm (baseline) with experiment B's arm: ID or ID:ARM."""
    store = composition.open_store(settings)
    report = compare_experiments(store, a, b)
    if as_json:
        payload = report.model_dump(mode="json")
        payload["compared"] = {"a": a, "b": b}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(f"compare: a = {a}, b = {b}\n")
        click.echo(render_markdown(report))
