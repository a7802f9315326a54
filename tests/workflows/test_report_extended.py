"""build_report's additions: bootstrap and flips per row, moved cases with reasons, resource
changes, judge usage, errors by class, the rubric check, the noise floor and A/A experiments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.experiments import (
    SHAS,
    all_runs,
    binary_effect,
    errored_run,
    make_spec,
    scored_run,
)
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.records import CriterionScore, JudgeRecord, RunResult, RunStatus, weighted_score
from workflows.report import ComparisonRow, ExperimentReport, build_report
from workflows.stats import case_means


def row(report: ExperimentReport, criterion: str) -> ComparisonRow:
    return next(r for r in report.comparisons[0].rows if r.criterion == criterion)


def with_criteria(run: RunResult, *criteria: CriterionScore) -> RunResult:
    return run.model_copy(update={"criteria": criteria, "score": weighted_score(criteria)})


def crit(name: str, score: float | None, rationale: str = "", **extra: object) -> CriterionScore:
    return CriterionScore(
        name=name, grader="regex", weight=1.0, score=score, rationale=rationale, **extra
    )


def aa_spec(n_cases: int, trials: int) -> ExperimentSpec:
    spec = make_spec(n_cases=n_cases, trials=trials)
    same = tuple(ArmSpec(name=a.name, ref="main", commit=SHAS["main"]) for a in spec.arms)
    return spec.model_copy(update={"arms": same})


def test_rows_carry_a_bootstrap_interval_close_to_the_t_interval() -> None:
    spec = make_spec(n_cases=40, trials=3)
    accuracy = row(build_report(spec, all_runs(spec, binary_effect(0.2, seed=2))), "accuracy")
    assert accuracy.boot_low is not None and accuracy.boot_high is not None
    width = accuracy.ci_high - accuracy.ci_low
    assert accuracy.boot_low == pytest.approx(accuracy.ci_low, abs=0.15 * width)
    assert accuracy.boot_high == pytest.approx(accuracy.ci_high, abs=0.15 * width)
    assert (
        accuracy.binary
        and not row(build_report(spec, all_runs(spec, binary_effect(0.2))), "overall").binary
    )


def test_rows_list_flipped_cases_and_trial_disagreement() -> None:
    spec = make_spec(n_cases=20, trials=3)
    runs = all_runs(spec, binary_effect(0.0, seed=3))
    report = build_report(spec, runs)
    accuracy = row(report, "accuracy")
    by_arm: dict[str, dict[str, list[float | None]]] = {"main": {}, "pr": {}}
    for run in runs:
        by_arm[run.arm].setdefault(run.case_id, []).append(run.criteria[0].score)
    base, head = case_means(by_arm["main"]), case_means(by_arm["pr"])
    assert accuracy.pass_to_fail == [c for c in base if base[c] >= 0.5 > head[c]]
    assert accuracy.fail_to_pass == [c for c in base if head[c] >= 0.5 > base[c]]
    mixed = [c for c, v in by_arm["main"].items() if len(set(v)) > 1]
    assert accuracy.base_disagreement == pytest.approx(len(mixed) / 20)


def test_moved_cases_name_the_criterion_and_its_failing_rationale() -> None:
    spec = make_spec(n_cases=4, trials=1)
    runs = []
    for i in range(4):
        for arm in ("main", "pr"):
            ok = (arm == "main") == (i < 2)  # cases 0-1 regress, 2-3 improve
            run = scored_run(spec, i, arm, 0, {})
            runs.append(
                with_criteria(
                    run,
                    crit("citations", 1.0 if ok else 0.0, "cites" if ok else f"no cite {i}"),
                    crit("tone", 1.0, "fine"),
                )
            )
    comparison = build_report(spec, runs).comparisons[0]
    regressed = comparison.regressed_cases
    assert [m.case_id for m in regressed] == ["case-00", "case-01"]
    assert (regressed[0].criterion, regressed[0].reason, regressed[0].reason_arm) == (
        "citations",
        "no cite 0",
        "pr",
    )
    assert regressed[0].delta == pytest.approx(-0.5)
    improved = comparison.improved_cases
    assert [m.case_id for m in improved] == ["case-02", "case-03"]
    assert (improved[0].reason, improved[0].reason_arm) == ("no cite 2", "main")


def test_moved_cases_are_capped_and_ordered_by_size() -> None:
    spec = make_spec(n_cases=12, trials=1)

    def score(case: int, arm: str, trial: int) -> dict[str, float | None]:
        return {"a": 1.0 if arm == "main" else 1.0 - case / 12}

    comparison = build_report(spec, all_runs(spec, score)).comparisons[0]
    assert [m.case_id for m in comparison.regressed_cases] == [
        f"case-{i:02d}" for i in (11, 10, 9, 8, 7)
    ]
    assert comparison.improved_cases == []


def test_resource_changes_are_relative_to_the_base_arm() -> None:
    spec = make_spec(n_cases=3, trials=2)
    runs = [
        scored_run(spec, i, arm, t, {"a": 1.0}, cost=0.02 if arm == "pr" else 0.01, wall=w)
        for i in range(3)
        for arm in ("main", "pr")
        for t, w in enumerate((10.0, 30.0) if arm == "main" else (15.0, 45.0))
    ]
    changes = {c.metric: c for c in build_report(spec, runs).comparisons[0].resources}
    assert changes["cost / run"].change == pytest.approx(1.0)
    assert changes["tokens / run"].change == pytest.approx(0.0)
    assert changes["wall p50"].base == pytest.approx(20.0)
    assert changes["wall p50"].change == pytest.approx(0.5)
    assert changes["wall p95"].change == pytest.approx(0.5)
    assert changes["judge cost / run"].change is None  # no judge: base 0


def test_judge_usage_is_kept_apart_from_the_agents() -> None:
    spec = make_spec(n_cases=2, trials=1)
    paid = JudgeRecord(model="m", calls=2, input_tokens=500, output_tokens=50, cost_usd=0.003)
    cached = JudgeRecord(model="m", calls=0)
    runs = [
        with_criteria(
            scored_run(spec, i, arm, 0, {}),
            crit("judged", 1.0, judge=paid if i == 0 else cached),
            crit("check", 1.0),
        )
        for i in range(2)
        for arm in ("main", "pr")
    ]
    summary = build_report(spec, runs).summaries[0]
    assert (summary.judge.criteria_judged, summary.judge.from_cache, summary.judge.calls) == (
        2,
        1,
        2,
    )
    assert summary.judge.cost_usd == pytest.approx(0.003)
    assert summary.input_tokens == 2000  # the agent's usage, unchanged by the judge's


def test_errors_by_class_carry_the_command_that_retries_them() -> None:
    spec = make_spec(n_cases=3, trials=1)
    runs = all_runs(spec, binary_effect(0.0))
    runs[0] = errored_run(spec, 0, "main", 0, RunStatus.JUDGE_ERROR, "judge unavailable: 503")
    runs[1] = errored_run(spec, 0, "pr", 0, RunStatus.TIMEOUT, "slow")
    runs[2] = errored_run(spec, 1, "main", 0, RunStatus.TIMEOUT, "slow")
    classes = build_report(spec, runs).error_classes
    assert [(c.status, c.count) for c in classes] == [
        (RunStatus.TIMEOUT, 2),
        (RunStatus.JUDGE_ERROR, 1),
    ]
    # timeouts are the agent's: counted, rerun only on purpose, and not from a PR comment
    assert classes[0].command == "evalbot rerun exp-1 --failed --include-agent-failures"
    assert classes[0].comment is None
    assert classes[1].command == "evalbot regrade exp-1" and classes[1].comment is None
    assert classes[1].infra and not classes[0].infra


def test_rubric_check_finds_mixed_and_stale_rulers() -> None:
    spec = make_spec(n_cases=2, trials=1)
    runs = [
        with_criteria(
            scored_run(spec, i, arm, 0, {}),
            crit("a", 1.0, rubric_hash="v2" if (i, arm) == (1, "pr") else "v1"),
            crit("b", 1.0, rubric_hash="b1"),
        )
        for i in range(2)
        for arm in ("main", "pr")
    ]
    plain = build_report(spec, runs).rubric
    assert (plain.mixed, plain.stale, plain.checked_against_catalog) == (["a"], [], False)
    current = {("case-00", "a"): "v1", ("case-01", "a"): "v1", ("case-00", "b"): "b2"}
    checked = build_report(spec, runs, current_rubric=current).rubric
    assert (checked.mixed, checked.stale) == (["a"], ["a", "b"])
    assert checked.changed
    legacy = build_report(spec, all_runs(spec, binary_effect(0.0))).rubric
    assert legacy.unhashed_runs == 4 and not legacy.changed


def test_aa_experiments_are_recognised_and_carry_the_noise_floor() -> None:
    spec = aa_spec(n_cases=30, trials=3)
    comparison = build_report(spec, all_runs(spec, binary_effect(0.0, seed=4))).comparisons[0]
    assert comparison.aa
    assert (
        not build_report(make_spec(), all_runs(make_spec(), binary_effect(0.0))).comparisons[0].aa
    )
    noise = comparison.noise
    assert noise is not None and noise.n_cases == 30 and noise.trials == pytest.approx(3)
    by_trials = {m.trials: m.mde for m in noise.mde_by_trials}
    assert set(by_trials) == {1, 3, 5, 10}
    assert by_trials[1] > by_trials[3] > by_trials[10]
    overall = comparison.rows[0]
    if noise.between_var > 0:  # unclipped: the projection at the current trials is exact
        assert by_trials[3] == pytest.approx(overall.mde)
    # binary trials with p = 0.5: within-case variance is about 0.25
    assert noise.within_var == pytest.approx(0.25, abs=0.05)


def aa_runs(seed: int, n_cases: int = 20, trials: int = 3, n_criteria: int = 12) -> list:
    spec = aa_spec(n_cases, trials)
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.1, 0.9, (n_criteria, n_cases))
    draws = rng.random((n_criteria, n_cases, 2, trials))

    def score(case: int, arm: str, trial: int) -> dict[str, float | None]:
        a = 0 if arm == "main" else 1
        return {f"c{k:02d}": float(draws[k, case, a, trial] < p[k, case]) for k in range(12)}

    return [spec, all_runs(spec, score)]


def test_simulated_aa_reports_flag_few_criteria() -> None:
    """The whole report path on 40 A/A experiments × 12 criteria: Holm keeps the share of
    flagged criteria far under 5%, and of experiments with any flag at about 5%."""
    flagged = experiments = 0
    for seed in range(40):
        spec, runs = aa_runs(seed)
        rows = build_report(spec, runs).comparisons[0].rows[1:]
        hits = sum(r.verdict.is_change for r in rows)
        flagged += hits
        experiments += hits > 0
    assert flagged / (40 * 12) <= 0.02
    assert experiments / 40 <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / 40)
