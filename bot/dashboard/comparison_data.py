"""What the comparison charts draw beyond the report itself (bot/dashboard/comparison_charts.py),
taken from the same pieces `build_report` uses: the score table (workflows/report/table.py), the
per-case trial means (`stats.case_means`, as the paired test and the moved cases use them) and
`stats.mean_pass_k` for every k from 1 to the trials (the report keeps k = 1 and k = trials)."""

from __future__ import annotations

from bot.dashboard.comparison_charts import CaseDelta, PassKPoint
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.report.table import OVERALL_KEY, Table, cells_in_order, criteria_order, score_table
from workflows.stats import case_means, is_binary, mean_pass_k


def experiment_table(spec: ExperimentSpec, runs: list[RunResult]) -> Table:
    """The score table of the report (the same cells, in the same order)."""
    ordered = cells_in_order(spec, runs)
    return score_table(spec, ordered, criteria_order(ordered))


def case_deltas(table: Table, base: str, head: str) -> list[CaseDelta]:
    """Per case scored in both arms: head's overall trial mean − base's."""
    before = case_means(table.scores[base][OVERALL_KEY])
    after = case_means(table.scores[head][OVERALL_KEY])
    return [CaseDelta(case, after[case] - before[case]) for case in after if case in before]


def pass_k_points(table: Table, arms: list[str], trials: int) -> list[PassKPoint]:
    """pass@k and pass^k per arm and binary criterion, for k = 1 … trials."""
    points = []
    for arm in arms:
        for criterion, scores in table.scores[arm].items():
            if criterion == OVERALL_KEY or not scores or not is_binary(scores):
                continue
            for k in range(1, trials + 1):
                found = mean_pass_k(scores, k)
                if found is not None:
                    points.append(PassKPoint(arm, criterion, k, found.pass_at_k, found.pass_hat_k))
    return points
