from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from tests.support.experiments import (
    all_runs,
    binary_effect,
    errored_run,
    make_spec,
    scored_run,
)
from workflows.records import RunStatus
from workflows.report import ComparisonRow, ExperimentReport, build_report
from workflows.stats import Verdict


def row(report: ExperimentReport, criterion: str, head: str = "pr") -> ComparisonRow:
    comparison = next(c for c in report.comparisons if c.head == head)
    return next(r for r in comparison.rows if r.criterion == criterion)


def three_criteria(case: int, arm: str, trial: int) -> dict[str, float | None]:
    """accuracy improves on most cases; citations regress on a few; clarity is never judged."""
    head = arm == "pr"
    return {
        "accuracy": float((head and case % 5 != 0) or trial == 0),
        "citations": float(not (head and case < 3)),
        "clarity": None,
    }


def test_rows_overall_first_then_rubric_order_with_not_judged() -> None:
    spec = make_spec()
    report = build_report(spec, all_runs(spec, three_criteria))
    names = [r.criterion for r in report.comparisons[0].rows]
    assert names == ["overall", "accuracy", "citations", "clarity"]
    assert report.criteria == ["accuracy", "citations", "clarity"]
    clarity = row(report, "clarity")
    assert clarity.verdict is Verdict.NOT_JUDGED and clarity.delta is None
    assert row(report, "accuracy").verdict is Verdict.IMPROVED
    assert report.progress.complete and report.progress.cells_done == 60


def test_holm_is_applied_across_judged_criteria_only() -> None:
    spec = make_spec()
    report = build_report(spec, all_runs(spec, three_criteria))
    p = [row(report, name).p_value for name in ("accuracy", "citations")]
    expected = multipletests(p, method="holm")[1]
    assert [row(report, n).p_adjusted for n in ("accuracy", "citations")] == pytest.approx(
        list(expected)
    )
    assert row(report, "overall").p_adjusted is None


def test_errored_cells_are_listed_apart_and_excluded_from_means() -> None:
    spec = make_spec(n_cases=4, trials=2)

    def score(case: int, arm: str, trial: int) -> dict[str, float | None]:
        return {"accuracy": float(arm == "pr" or case == trial)}

    runs = all_runs(spec, score)
    broken = {
        "exp-1/case-00/pr/0": errored_run(spec, 0, "pr", 0, RunStatus.TIMEOUT, "ran 1800 s"),
        "exp-1/case-03/pr/0": errored_run(spec, 3, "pr", 0, RunStatus.SANDBOX_ERROR, "died"),
        "exp-1/case-03/pr/1": errored_run(spec, 3, "pr", 1, RunStatus.AGENT_ERROR, "exit 1"),
    }
    runs = [broken.get(r.run_id, r) for r in runs]
    report = build_report(spec, runs)

    accuracy = row(report, "accuracy")
    assert accuracy.n_cases == 3 and accuracy.dropped_cases == ["case-03"]
    base_means = [0.5, 0.5, 0.0]  # case-00: trial 0 passes; case-01: trial 1; case-02: none
    assert accuracy.base_mean == pytest.approx(np.mean(base_means))
    assert accuracy.head_mean == 1.0  # the errors are not zeros
    assert accuracy.p_value == pytest.approx(sps.ttest_rel([1, 1, 1], base_means).pvalue)

    assert [e.run_id for e in report.errors] == list(broken)
    assert report.errors_by_status == {"timeout": 1, "sandbox_error": 1, "agent_error": 1}
    assert [e.infra for e in report.errors] == [False, True, False]
    pr = report.summaries[1]
    assert (pr.cells_done, pr.scored, pr.errored) == (8, 5, 3)
    assert pr.errors_by_status["timeout"] == 1


def test_partial_experiment_reports_progress() -> None:
    spec = make_spec(n_cases=6, trials=2)
    runs = [r for r in all_runs(spec, binary_effect(0.3)) if r.case_id < "case-03"]
    runs = [r for r in runs if not (r.case_id == "case-02" and r.arm == "pr")]
    report = build_report(spec, runs)
    assert not report.progress.complete
    assert (report.progress.cells_done, report.progress.cells_total) == (10, 24)
    accuracy = row(report, "accuracy")
    assert accuracy.n_cases == 2
    assert accuracy.dropped_cases == []
    assert accuracy.pending_cases == ["case-02"]  # not yet run on pr: pending, not dropped
    assert accuracy.verdict is Verdict.TOO_FEW  # 2 paired cases so far


def test_summary_cost_tokens_and_wall_percentiles() -> None:
    spec = make_spec(n_cases=5, trials=2)
    walls = [float(w) for w in range(1, 11)]
    runs = [
        scored_run(spec, i, arm, t, {"accuracy": 1.0}, cost=0.01 * (i + 1), wall=walls[2 * i + t])
        for i in range(5)
        for arm in ("main", "pr")
        for t in range(2)
    ]
    summary = build_report(spec, runs).summaries[0]
    assert summary.total_cost_usd == pytest.approx(2 * (0.01 + 0.02 + 0.03 + 0.04 + 0.05))
    assert summary.mean_cost_usd == pytest.approx(0.03)
    assert (summary.input_tokens, summary.output_tokens) == (10_000, 2_000)
    assert summary.wall_p50_s == pytest.approx(5.5)
    assert summary.wall_p95_s == pytest.approx(9.55)


def test_pass_at_k_for_binary_criteria() -> None:
    spec = make_spec(n_cases=2, trials=3)

    def score(case: int, arm: str, trial: int) -> dict[str, float | None]:
        return {"accuracy": float(trial <= case), "partial": 0.5}

    summary = build_report(spec, all_runs(spec, score)).summaries[0]
    rows = {(r.criterion, r.k): r for r in summary.pass_k}
    assert set(rows) == {("accuracy", 1), ("accuracy", 3)}  # "partial" is not binary
    assert rows[("accuracy", 1)].pass_at_k == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert rows[("accuracy", 3)].pass_at_k == 1.0
    assert rows[("accuracy", 3)].pass_hat_k == 0.0


def test_every_arm_against_the_baseline() -> None:
    spec = make_spec(arms=("main", "pr", "alt"))
    runs = all_runs(spec, binary_effect(0.4))
    report = build_report(spec, runs)
    assert [(c.base, c.head) for c in report.comparisons] == [("main", "pr"), ("main", "alt")]
    pivoted = build_report(spec, runs, baseline_arm="pr")
    assert [(c.base, c.head) for c in pivoted.comparisons] == [("pr", "main"), ("pr", "alt")]
    assert row(pivoted, "accuracy", head="main").delta == pytest.approx(
        -row(report, "accuracy").delta  # type: ignore[operator]
    )
    with pytest.raises(ValueError, match="unknown baseline arm 'nope'; the arms are main, pr, alt"):
        build_report(spec, runs, baseline_arm="nope")


def test_foreign_runs_are_rejected_and_duplicates_collapse() -> None:
    spec = make_spec(n_cases=2, trials=1)
    runs = all_runs(spec, binary_effect(0.0))
    other = make_spec(n_cases=3, trials=1)
    with pytest.raises(ValueError, match="run 'exp-1/case-02/main/0' is not a cell"):
        build_report(spec, [*runs, *all_runs(other, binary_effect(0.0))[-2:]])
    rerun = errored_run(spec, 0, "pr", 0, RunStatus.TIMEOUT, "slow")
    report = build_report(spec, [*runs, rerun])
    assert report.progress.cells_done == 4 and len(report.errors) == 1


def test_report_is_json_serialisable_and_round_trips() -> None:
    spec = make_spec()
    runs = all_runs(spec, three_criteria)
    runs[0] = errored_run(spec, 0, "main", 0, RunStatus.OUT_OF_MEMORY, "killed")
    report = build_report(spec, runs)
    data = json.loads(json.dumps(report.model_dump(mode="json")))
    assert data["comparisons"][0]["rows"][1]["verdict"] == "improved"
    assert data["errors"][0]["status"] == "out_of_memory"
    assert ExperimentReport.model_validate(data) == report
