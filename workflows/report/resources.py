"""Per arm: cells, errors, cost, tokens, wall time, pass@k, judge usage; and their changes."""

from __future__ import annotations

from collections import Counter

import numpy as np

from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import Outcome, outcome_of
from workflows.records import RunResult
from workflows.report.report_models import ArmSummary, JudgeUsage, PassKRow, ResourceChange, Unit
from workflows.report.table import OVERALL_KEY, ArmScores
from workflows.stats import is_binary, mean_pass_k


def arm_summary(
    spec: ExperimentSpec, runs: list[RunResult], scores: ArmScores, arm: str
) -> ArmSummary:
    mine = [r for r in runs if r.arm == arm]
    costs = [r.usage.cost_usd for r in mine]
    tokens = [r.usage.input_tokens + r.usage.output_tokens for r in mine]
    errored = [r for r in mine if r.status.is_error]
    outcomes = Counter(outcome_of(r.status) for r in mine)
    counted = outcomes[Outcome.SCORED] + outcomes[Outcome.FAILED]
    return ArmSummary(
        arm=arm,
        cells_total=len(spec.case_ids) * spec.trials,
        cells_done=len(mine),
        scored=len(mine) - len(errored),
        errored=len(errored),
        failed=outcomes[Outcome.FAILED],
        excluded=outcomes[Outcome.EXCLUDED],
        failure_rate=outcomes[Outcome.FAILED] / counted if counted else None,
        errors_by_status=count_errors(mine),
        total_cost_usd=float(sum(costs)),
        mean_cost_usd=_mean(costs),
        sandbox_cost_usd=float(sum(r.sandbox.cost_usd for r in mine)),
        mean_sandbox_cost_usd=_mean([r.sandbox.cost_usd for r in mine]),
        input_tokens=sum(r.usage.input_tokens for r in mine),
        output_tokens=sum(r.usage.output_tokens for r in mine),
        tokens_per_run=_mean(tokens),
        wall_p50_s=_percentile([r.wall_s for r in mine], 50),
        wall_p95_s=_percentile([r.wall_s for r in mine], 95),
        pass_k=_pass_k_rows(scores, spec.trials),
        judge=judge_usage(mine),
    )


def count_errors(runs: list[RunResult]) -> dict[str, int]:
    return dict(Counter(r.status.value for r in runs if r.status.is_error).most_common())


def judge_usage(runs: list[RunResult]) -> JudgeUsage:
    records = [c.judge for r in runs for c in r.criteria if c.judge is not None]
    return JudgeUsage(
        criteria_judged=len(records),
        from_cache=sum(1 for j in records if j.calls == 0),
        calls=sum(j.calls for j in records),
        input_tokens=sum(j.input_tokens for j in records),
        output_tokens=sum(j.output_tokens for j in records),
        cost_usd=float(sum(j.cost_usd for j in records)),
    )


def _mean(values: list[float] | list[int]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _pass_k_rows(by_criterion: ArmScores, trials: int) -> list[PassKRow]:
    rows = []
    for criterion, scores in by_criterion.items():
        if criterion == OVERALL_KEY or not is_binary(scores):
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


def resource_changes(base: ArmSummary, head: ArmSummary) -> list[ResourceChange]:
    """Cost, tokens and wall time of head against base, with the relative change."""
    per_run_judge = [
        s.judge.cost_usd / s.cells_done if s.cells_done else None for s in (base, head)
    ]
    metrics: list[tuple[str, Unit, float | None, float | None]] = [
        ("cost / run", "usd", base.mean_cost_usd, head.mean_cost_usd),
        ("tokens / run", "tokens", base.tokens_per_run, head.tokens_per_run),
        ("wall p50", "seconds", base.wall_p50_s, head.wall_p50_s),
        ("wall p95", "seconds", base.wall_p95_s, head.wall_p95_s),
        ("judge cost / run", "usd", per_run_judge[0], per_run_judge[1]),
    ]
    if base.sandbox_cost_usd or head.sandbox_cost_usd:  # only providers that bill (Modal)
        sandbox_costs = (base.mean_sandbox_cost_usd, head.mean_sandbox_cost_usd)
        metrics.insert(1, ("sandbox cost / run", "usd", *sandbox_costs))
    return [
        ResourceChange(metric=m, unit=u, base=b, head=h, change=_relative(b, h))
        for m, u, b, h in metrics
    ]


def _relative(base: float | None, head: float | None) -> float | None:
    if base is None or head is None or base == 0:
        return None
    return (head - base) / base
