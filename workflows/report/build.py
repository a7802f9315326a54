"""`build_report`: the experiment's runs in, the report data out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from workflows.catalog.labels import RERAN_AGENT_FAILURES, budget_from_labels
from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import (
    BUILD_FAILED,
    InfrastructureLoss,
    Outcome,
    is_build_failure,
    outcome_of,
)
from workflows.records import RunResult
from workflows.report.checks import error_classes, is_aa, noise_summary, rubric_check
from workflows.report.comparisons import comparison_rows, failure_rate_row
from workflows.report.frontier import frontier_points
from workflows.report.images import image_notes
from workflows.report.moved_cases import moved_cases
from workflows.report.report_models import (
    ArmComparison,
    ArmInfo,
    ArmSummary,
    BudgetNote,
    BuildFailure,
    ExperimentReport,
    LostCells,
    Progress,
    RunErrorItem,
)
from workflows.report.resources import arm_summary, count_errors, resource_changes
from workflows.report.table import Table, cells_in_order, criteria_order, score_table
from workflows.report.verdict import comparison_verdict


def build_report(
    spec: ExperimentSpec,
    runs: list[RunResult],
    *,
    baseline_arm: str | None = None,
    current_rubric: Mapping[tuple[str, str], str] | None = None,
) -> ExperimentReport:
    """Compare every arm with `baseline_arm` (default: the first arm) on the finished runs.

    `current_rubric` — `(case, criterion) -> hash` of the catalog now (see
    workflows.scoring.rubric_hash) — lets the report say which criteria changed since scoring."""
    report, _ = build_report_and_table(
        spec, runs, baseline_arm=baseline_arm, current_rubric=current_rubric
    )
    return report


def build_report_and_table(
    spec: ExperimentSpec,
    runs: list[RunResult],
    *,
    baseline_arm: str | None = None,
    current_rubric: Mapping[tuple[str, str], str] | None = None,
) -> tuple[ExperimentReport, Table]:
    """`build_report`, and the score table it was computed from (the dashboard draws its charts
    from the same table rather than arranging thousands of runs twice)."""
    baseline = _baseline(spec, baseline_arm)
    ordered = cells_in_order(spec, runs)
    criteria = criteria_order(ordered)
    table = score_table(spec, ordered, criteria)
    summaries = [arm_summary(spec, ordered, table.scores[a.name], a.name) for a in spec.arms]
    by_arm = {s.arm: s for s in summaries}
    report = ExperimentReport(
        experiment_id=spec.experiment_id,
        dataset=spec.dataset,
        trials=spec.trials,
        baseline=baseline,
        arms=[_arm_info(spec, a.name) for a in spec.arms],
        criteria=criteria,
        comparisons=[
            _compare_arms(spec, table, criteria, by_arm, baseline, a.name)
            for a in spec.arms
            if a.name != baseline
        ],
        summaries=summaries,
        errors=[_error_item(r) for r in ordered if r.status.is_error],
        errors_by_status=count_errors(ordered),
        progress=_progress(spec, ordered),
        error_classes=error_classes(spec.experiment_id, ordered),
        rubric=rubric_check(ordered, current_rubric),
        images=image_notes(spec, ordered),
        budget=_budget(spec, ordered),
        build_failures=_build_failures(spec, ordered),
        reran_agent_failures=int(spec.labels.get(RERAN_AGENT_FAILURES, "0") or 0),
        frontier=frontier_points([a.name for a in spec.arms], ordered, table),
    )
    return report, table


def _build_failures(spec: ExperimentSpec, runs: list[RunResult]) -> list[BuildFailure]:
    """Arms whose commit did not build, with the last lines of the build's output."""
    failures = []
    for arm in spec.arms:
        failed = [r for r in runs if r.arm == arm.name and is_build_failure(r)]
        if failed:
            detail = failed[0].error.removeprefix(BUILD_FAILED).partition(": ")[2]  # after "at SHA"
            failures.append(BuildFailure(arm=arm.name, cells=len(failed), log_tail=detail))
    return failures


def infrastructure_loss(base: ArmSummary, head: ArmSummary) -> LostCells:
    """Cells of each arm excluded as infrastructure, of the cells that finished (counted once, in
    the arms' summaries)."""
    loss = InfrastructureLoss(base.excluded, base.cells_done, head.excluded, head.cells_done)
    return LostCells(
        base_lost=base.excluded,
        base_cells=base.cells_done,
        head_lost=head.excluded,
        head_cells=head.cells_done,
        incomplete=loss.incomplete,
    )


def _budget(spec: ExperimentSpec, runs: list[RunResult]) -> BudgetNote | None:
    """Stopped by budget: cells are missing and what ran spent the budget
    (workflows/experiment_budget.py)."""
    budget = budget_from_labels(spec.labels)
    if budget is None:
        return None
    spent = round(sum(r.usage.cost_usd + r.sandbox.cost_usd for r in runs), 6)
    stopped = len(runs) < spec.cell_count and spent >= budget
    return BudgetNote(budget_usd=budget, spent_usd=spent, stopped=stopped)


def _baseline(spec: ExperimentSpec, baseline_arm: str | None) -> str:
    names = [a.name for a in spec.arms]
    if baseline_arm is None:
        return names[0]
    if baseline_arm not in names:
        raise ValueError(f"unknown baseline arm '{baseline_arm}'; the arms are {', '.join(names)}")
    return baseline_arm


def _compare_arms(
    spec: ExperimentSpec,
    table: Table,
    criteria: list[str],
    summaries: dict[str, ArmSummary],
    base: str,
    head: str,
) -> ArmComparison:
    regressed, improved = moved_cases(table, criteria, base, head)
    rows = comparison_rows(table, criteria, base, head)
    failure_rate = failure_rate_row(table, base, head)
    loss = infrastructure_loss(summaries[base], summaries[head])
    verdict, reason = comparison_verdict(rows, failure_rate, loss)
    return ArmComparison(
        base=base,
        head=head,
        verdict=verdict,
        verdict_reason=reason,
        rows=rows,
        failure_rate=failure_rate,
        infrastructure=loss,
        aa=is_aa(spec, base, head),
        resources=resource_changes(summaries[base], summaries[head]),
        regressed_cases=regressed,
        improved_cases=improved,
        noise=noise_summary(table, base, head, spec.trials),
    )


def _error_item(run: RunResult) -> RunErrorItem:
    return RunErrorItem(
        run_id=run.run_id,
        case_id=run.case_id,
        arm=run.arm,
        trial=run.trial,
        status=run.status,
        infra=outcome_of(run.status) is Outcome.EXCLUDED,
        error=run.error,
    )


def _progress(spec: ExperimentSpec, runs: list[RunResult]) -> Progress:
    total = spec.cell_count
    return Progress(
        cells_done=len(runs),
        cells_total=total,
        complete=len(runs) == total,
        by_status=dict(Counter(r.status.value for r in runs).most_common()),
    )


def _arm_info(spec: ExperimentSpec, name: str) -> ArmInfo:
    arm = spec.arm(name)
    return ArmInfo(
        name=arm.name, ref=arm.ref, commit=arm.commit, short_sha=arm.commit[:7], config=arm.config
    )
