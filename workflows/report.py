"""The experiment report as data: paired comparisons per criterion, errors apart, cost and time.

`build_report(spec, runs)` works on any subset of the cells, so the same report describes a
running experiment (with `progress.complete = False`) and a finished one. It is JSON-serialisable
(`report.model_dump(mode="json")`) and rendered to Markdown by bot/render.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult, RunStatus, weighted_score
from workflows.stats import (
    ALPHA,
    PairedComparison,
    Verdict,
    holm_verdicts,
    is_binary,
    mean_pass_k,
    paired_comparison,
)

OVERALL = "overall"  # the row name of the weighted run score
_OVERALL_KEY = "(overall)"  # its key in the score table: not a valid criterion name, so no clash

# arm -> criterion -> case -> judged scores of that arm's scored trials ([] = finished, none usable)
Table = dict[str, dict[str, dict[str, list[float | None]]]]


class ReportModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class ArmInfo(ReportModel):
    name: str
    ref: str
    commit: str
    short_sha: str
    config: dict[str, str] = Field(default_factory=dict)


class ComparisonRow(ReportModel):
    """One criterion (or the overall score): head − base, paired by case."""

    criterion: str
    overall: bool = False
    base_mean: float | None = None
    head_mean: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = Field(None, description="Holm across criteria; None for overall.")
    verdict: Verdict
    mde: float | None = None
    n_cases: int = 0
    dropped_cases: list[str] = Field(default_factory=list)
    pending_cases: list[str] = Field(default_factory=list)


class ArmComparison(ReportModel):
    base: str
    head: str
    rows: list[ComparisonRow]  # overall first, then criteria in first-seen rubric order


class PassKRow(ReportModel):
    criterion: str
    k: int
    pass_at_k: float
    pass_hat_k: float
    n_cases: int


class ArmSummary(ReportModel):
    arm: str
    cells_total: int
    cells_done: int
    scored: int
    errored: int
    errors_by_status: dict[str, int] = Field(default_factory=dict)
    total_cost_usd: float = 0.0
    mean_cost_usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    wall_p50_s: float | None = None
    wall_p95_s: float | None = None
    pass_k: list[PassKRow] = Field(default_factory=list)


class RunErrorItem(ReportModel):
    run_id: str
    case_id: str
    arm: str
    trial: int
    status: RunStatus
    infra: bool
    error: str


class Progress(ReportModel):
    cells_done: int
    cells_total: int
    complete: bool
    by_status: dict[str, int] = Field(default_factory=dict)


class ExperimentReport(ReportModel):
    experiment_id: str
    dataset: str
    trials: int
    baseline: str
    arms: list[ArmInfo]
    criteria: list[str]
    comparisons: list[ArmComparison]
    summaries: list[ArmSummary]
    errors: list[RunErrorItem]
    errors_by_status: dict[str, int]
    progress: Progress
    alpha: float = ALPHA


def build_report(
    spec: ExperimentSpec, runs: list[RunResult], *, baseline_arm: str | None = None
) -> ExperimentReport:
    """Compare every arm with `baseline_arm` (default: the first arm) on the finished runs."""
    baseline = _baseline(spec, baseline_arm)
    ordered = _cells_in_order(spec, runs)
    criteria = _criteria_order(ordered)
    table = _score_table(spec, ordered, criteria)
    return ExperimentReport(
        experiment_id=spec.experiment_id,
        dataset=spec.dataset,
        trials=spec.trials,
        baseline=baseline,
        arms=[_arm_info(spec, a.name) for a in spec.arms],
        criteria=criteria,
        comparisons=[
            _compare_arms(table, criteria, baseline, a.name)
            for a in spec.arms
            if a.name != baseline
        ],
        summaries=[_summary(spec, ordered, table, a.name) for a in spec.arms],
        errors=[_error_item(r) for r in ordered if r.status.is_error],
        errors_by_status=_count_errors(ordered),
        progress=_progress(spec, ordered),
    )


def _baseline(spec: ExperimentSpec, baseline_arm: str | None) -> str:
    names = [a.name for a in spec.arms]
    if baseline_arm is None:
        return names[0]
    if baseline_arm not in names:
        raise ValueError(f"unknown baseline arm '{baseline_arm}'; the arms are {', '.join(names)}")
    return baseline_arm


def _cells_in_order(spec: ExperimentSpec, runs: Iterable[RunResult]) -> list[RunResult]:
    """One result per cell (the last given wins), in the spec's cell order."""
    position = {cell.run_id: i for i, cell in enumerate(spec.cells())}
    latest: dict[str, RunResult] = {}
    for run in runs:
        if run.run_id not in position:
            raise ValueError(
                f"run '{run.run_id}' is not a cell of experiment '{spec.experiment_id}'"
            )
        latest[run.run_id] = run
    return sorted(latest.values(), key=lambda r: position[r.run_id])


def _criteria_order(runs: list[RunResult]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for criterion in run.criteria:
            seen.setdefault(criterion.name, None)
    return list(seen)


def _score_table(spec: ExperimentSpec, runs: list[RunResult], criteria: list[str]) -> Table:
    """Scores by arm, criterion and case. A case is present for an arm once any of its cells
    finished, so cases whose trials all errored show up as dropped, not as pending."""
    table: Table = {a.name: {c: {} for c in [_OVERALL_KEY, *criteria]} for a in spec.arms}
    for run in runs:
        by_criterion = table[run.arm]
        for values in by_criterion.values():
            values.setdefault(run.case_id, [])
        if run.status is not RunStatus.SCORED:
            continue
        by_criterion[_OVERALL_KEY][run.case_id].append(_run_score(run))
        for criterion in run.criteria:
            by_criterion[criterion.name][run.case_id].append(criterion.score)
    return table


def _run_score(run: RunResult) -> float | None:
    return run.score if run.score is not None else weighted_score(run.criteria)


def _compare_arms(table: Table, criteria: list[str], base: str, head: str) -> ArmComparison:
    """The overall row keeps its own uncorrected verdict; criteria rows are Holm-corrected."""
    compared = {
        c: paired_comparison(table[base][c], table[head][c]) for c in [_OVERALL_KEY, *criteria]
    }
    judged = {c: r for c, r in compared.items() if _judged(table, c, base, head)}
    adjusted = holm_verdicts({c: r for c, r in judged.items() if c != _OVERALL_KEY})
    rows = []
    for name, result in compared.items():
        if name not in judged:  # nothing to pair, so nothing was dropped either
            rows.append(_row(name, replace(result, dropped=()), verdict=Verdict.NOT_JUDGED))
        elif name == _OVERALL_KEY:
            rows.append(_row(name, result, verdict=result.verdict))
        else:
            p_adjusted, verdict = adjusted[name]
            rows.append(_row(name, result, verdict=verdict, p_adjusted=p_adjusted))
    return ArmComparison(base=base, head=head, rows=rows)


def _judged(table: Table, criterion: str, *arms: str) -> bool:
    return any(
        score is not None
        for arm in arms
        for scores in table[arm][criterion].values()
        for score in scores
    )


def _row(
    name: str, result: PairedComparison, *, verdict: Verdict, p_adjusted: float | None = None
) -> ComparisonRow:
    return ComparisonRow(
        criterion=OVERALL if name == _OVERALL_KEY else name,
        overall=name == _OVERALL_KEY,
        base_mean=result.base_mean,
        head_mean=result.head_mean,
        delta=result.delta,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        p_value=result.p_value,
        p_adjusted=p_adjusted,
        verdict=verdict,
        mde=result.mde,
        n_cases=result.n,
        dropped_cases=list(result.dropped),
        pending_cases=list(result.pending),
    )


def _summary(spec: ExperimentSpec, runs: list[RunResult], table: Table, arm: str) -> ArmSummary:
    mine = [r for r in runs if r.arm == arm]
    costs = [r.usage.cost_usd for r in mine]
    walls = [r.wall_s for r in mine]
    errored = [r for r in mine if r.status.is_error]
    return ArmSummary(
        arm=arm,
        cells_total=len(spec.case_ids) * spec.trials,
        cells_done=len(mine),
        scored=len(mine) - len(errored),
        errored=len(errored),
        errors_by_status=_count_errors(mine),
        total_cost_usd=float(sum(costs)),
        mean_cost_usd=float(np.mean(costs)) if costs else None,
        input_tokens=sum(r.usage.input_tokens for r in mine),
        output_tokens=sum(r.usage.output_tokens for r in mine),
        wall_p50_s=_percentile(walls, 50),
        wall_p95_s=_percentile(walls, 95),
        pass_k=_pass_k_rows(table[arm], spec.trials),
    )


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _pass_k_rows(
    by_criterion: dict[str, dict[str, list[float | None]]], trials: int
) -> list[PassKRow]:
    rows = []
    for criterion, scores in by_criterion.items():
        if criterion == _OVERALL_KEY or not is_binary(scores):
            continue
        for k in sorted({1, trials}):
            found = mean_pass_k(scores, k)
            if found is not None:
                rows.append(
                    PassKRow(
                        criterion=criterion,
                        k=k,
                        pass_at_k=found.pass_at_k,
                        pass_hat_k=found.pass_hat_k,
                        n_cases=found.n_cases,
                    )
                )
    return rows


def _error_item(run: RunResult) -> RunErrorItem:
    return RunErrorItem(
        run_id=run.run_id,
        case_id=run.case_id,
        arm=run.arm,
        trial=run.trial,
        status=run.status,
        infra=run.status.is_infra,
        error=run.error,
    )


def _count_errors(runs: list[RunResult]) -> dict[str, int]:
    return dict(Counter(r.status.value for r in runs if r.status.is_error).most_common())


def _progress(spec: ExperimentSpec, runs: list[RunResult]) -> Progress:
    total = len(spec.cells())
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
