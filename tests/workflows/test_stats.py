"""workflows.stats against independent computations (scipy, statsmodels, brute force)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import statsmodels.api as sm
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from workflows.stats import (
    PairedComparison,
    Verdict,
    holm,
    holm_verdicts,
    is_binary,
    mean_pass_k,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
)

Scores = dict[str, list[float | None]]


def simulate(n_cases: int, trials: int, effect: float, seed: int) -> tuple[Scores, Scores]:
    """Per-case difficulty, a per-case effect around `effect`, noisy trials."""
    rng = np.random.default_rng(seed)
    base: Scores = {}
    head: Scores = {}
    for i in range(n_cases):
        level = rng.uniform(0.2, 0.8)
        shift = rng.normal(effect, 0.1)
        base[f"c{i}"] = list(np.clip(level + rng.normal(0, 0.2, trials), 0, 1))
        head[f"c{i}"] = list(np.clip(level + shift + rng.normal(0, 0.2, trials), 0, 1))
    return base, head


def per_case_means(scores: Scores) -> np.ndarray:
    return np.array([np.mean([v for v in values if v is not None]) for values in scores.values()])


@pytest.mark.parametrize(("effect", "seed"), [(0.1, 1), (0.0, 2), (-0.05, 3)])
def test_matches_scipy_paired_t_test_on_case_means(effect: float, seed: int) -> None:
    base, head = simulate(12, 3, effect, seed)
    result = paired_comparison(base, head)
    reference = sps.ttest_rel(per_case_means(head), per_case_means(base))
    interval = reference.confidence_interval(0.95)
    assert (result.n, result.method) == (12, "t")
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert (result.ci_low, result.ci_high) == pytest.approx((interval.low, interval.high))
    assert result.delta == pytest.approx(np.mean(per_case_means(head) - per_case_means(base)))
    assert result.head_mean - result.base_mean == pytest.approx(result.delta)


def cluster_robust_fit(
    base: Scores, head: Scores, correction: bool
) -> sm.regression.linear_model.RegressionResultsWrapper:
    cases, arm, y = [], [], []
    for index, case_id in enumerate(base):
        for is_head, scores in ((0.0, base), (1.0, head)):
            for value in scores[case_id]:
                cases.append(index)
                arm.append(is_head)
                y.append(value)
    design = sm.add_constant(np.array(arm))
    return sm.OLS(np.array(y), design).fit(
        cov_type="cluster",
        cov_kwds={"groups": np.array(cases), "use_correction": correction},
        use_t=True,
    )


def test_agrees_with_cluster_robust_ols_on_cells_for_a_balanced_design() -> None:
    """Paired t on case means == OLS on cells with case-clustered SEs, up to one small-sample
    factor: statsmodels' CR1 multiplies the variance by G/(G-1)·(N-1)/(N-K); the paired t
    variance equals the cluster sandwich times G/(G-1) only. Both use G-1 degrees of freedom."""
    base, head = simulate(10, 3, 0.1, 7)
    result = paired_comparison(base, head)
    fit = cluster_robust_fit(base, head, correction=True)
    n_cells, n_params, n_cases = 60, 2, 10
    se_paired = result.sd / math.sqrt(n_cases)
    assert fit.params[1] == pytest.approx(result.delta, rel=1e-12)
    assert fit.bse[1] ** 2 == pytest.approx(se_paired**2 * (n_cells - 1) / (n_cells - n_params))
    uncorrected = cluster_robust_fit(base, head, correction=False)
    assert uncorrected.bse[1] ** 2 * n_cases / (n_cases - 1) == pytest.approx(se_paired**2)
    # Same G-1 degrees of freedom: removing the (N-1)/(N-K) factor reproduces the p-value.
    t_stat = fit.params[1] / (fit.bse[1] / math.sqrt((n_cells - 1) / (n_cells - n_params)))
    assert 2 * sps.t.sf(abs(t_stat), n_cases - 1) == pytest.approx(result.p_value, rel=1e-9)
    # And the published CR1 p-value is close (within 10% relative) to ours.
    assert fit.pvalues[1] == pytest.approx(result.p_value, rel=0.1)


def test_mde_has_about_80_percent_power() -> None:
    base, head = simulate(20, 2, 0.0, 11)
    result = paired_comparison(base, head)
    assert result.mde is not None and result.sd is not None
    power = TTestPower().power(effect_size=result.mde / result.sd, nobs=20, alpha=0.05)
    assert power == pytest.approx(0.8, abs=0.02)


def test_verdicts_for_large_positive_negative_and_zero_effects() -> None:
    assert paired_comparison(*simulate(30, 3, 0.3, 1)).verdict is Verdict.IMPROVED
    assert paired_comparison(*simulate(30, 3, -0.3, 2)).verdict is Verdict.REGRESSED
    null = paired_comparison(*simulate(30, 3, 0.0, 3))
    assert null.verdict is Verdict.NO_CHANGE
    assert null.ci_low < 0 < null.ci_high


def test_fewer_than_two_cases_is_not_enough() -> None:
    one = paired_comparison({"a": [0.0, 1.0]}, {"a": [1.0]})
    assert (one.n, one.verdict, one.delta, one.p_value, one.mde, one.ci_low) == (
        1,
        Verdict.TOO_FEW,
        0.5,
        None,
        None,
        None,
    )
    assert (one.method, one.cases_needed) == ("", None)
    assert paired_comparison({}, {}).verdict is Verdict.TOO_FEW


def test_identical_differences_zero_is_no_change_with_a_non_degenerate_interval() -> None:
    same: Scores = {f"c{i}": [0.25 * (i % 5)] for i in range(12)}
    result = paired_comparison(same, same)
    q = 1 - 0.025 ** (1 / 12)  # the share of cases that could still move, at 97.5%
    assert (result.method, result.verdict) == ("bound", Verdict.NO_CHANGE)
    assert (result.delta, result.p_value, result.cases_needed) == (0.0, 1.0, None)
    assert (result.ci_low, result.ci_high) == pytest.approx((-q, q))


@pytest.mark.parametrize(
    ("shift", "verdict"), [(0.5, Verdict.IMPROVED), (-0.5, Verdict.REGRESSED), (0.25, None)]
)
def test_identical_nonzero_differences_use_the_distribution_free_bound(
    shift: float, verdict: Verdict | None
) -> None:
    """12 cases that all moved by the same amount: p = 2(1 + |δ|)^-12, never 0; the verdict
    follows p (δ = 0.25 gives p = 0.137: no detectable change)."""
    base: Scores = {f"c{i}": [0.25 + 0.05 * (i % 4), 0.25] for i in range(12)}
    head: Scores = {k: [v + shift for v in vs if v is not None] for k, vs in base.items()}
    result = paired_comparison(base, head)
    p = 2 * (1 + abs(shift)) ** -12
    assert result.method == "bound"
    assert result.p_value == pytest.approx(p)
    assert result.verdict is (verdict or Verdict.NO_CHANGE)
    assert result.ci_low < shift < result.ci_high
    assert (result.ci_low > 0 or result.ci_high < 0) == (p < 0.05)
    few = paired_comparison(
        {k: base[k] for k in list(base)[:3]}, {k: head[k] for k in list(head)[:3]}
    )
    assert few.verdict is Verdict.TOO_FEW
    assert few.p_value == pytest.approx(min(1.0, 2 * (1 + abs(shift)) ** -3))


def test_cases_without_a_score_in_either_arm_are_dropped_and_listed() -> None:
    base: Scores = {"a": [1.0], "b": [0.0], "c": [1.0], "errored": [], "unjudged": [None]}
    head: Scores = {
        "a": [1.0],
        "b": [1.0],
        "c": [0.0],
        "errored": [1.0],
        "unjudged": [1.0],
        "x": [1.0],
    }
    result = paired_comparison(base, head)
    assert result.n == 3
    assert result.dropped == ("errored", "unjudged")
    assert result.pending == ("x",)
    assert (result.verdict, result.method) == (Verdict.TOO_FEW, "exact binary")
    assert result.p_value == pytest.approx(sps.binomtest(1, 2).pvalue)  # one flip each way


def test_not_judged_trials_are_ignored_in_case_means() -> None:
    result = paired_comparison({"a": [0.0, None], "b": [0.0]}, {"a": [1.0, None, 0.0], "b": [1.0]})
    assert result.head_mean == pytest.approx(0.75)
    assert result.delta == pytest.approx(0.75)


HOLM_CASES = [
    [0.01],
    [0.0, 1.0, 0.5],
    [0.01, 0.01, 0.04, 0.04],  # ties
    [0.02, 0.03, 0.9, 0.001, 0.2],
    *(list(np.random.default_rng(seed).uniform(0, 0.2, 7)) for seed in range(4)),
]


@pytest.mark.parametrize("p_values", HOLM_CASES)
def test_holm_matches_statsmodels(p_values: list[float]) -> None:
    expected = multipletests(p_values, alpha=0.05, method="holm")[1]
    assert holm(p_values) == pytest.approx(list(expected))


def comparison(delta: float, p_value: float | None) -> PairedComparison:
    return PairedComparison(10, Verdict.NO_CHANGE, delta=delta, p_value=p_value)


def test_holm_verdicts_can_turn_a_nominal_change_into_no_change() -> None:
    verdicts = holm_verdicts(
        {
            "accuracy": comparison(0.2, 0.001),
            "citations": comparison(-0.1, 0.03),  # < .05 alone; Holm: 2 × .03 = .06
            "privilege": comparison(0.05, 0.5),
            "clarity": comparison(0.0, None),
        }
    )
    assert verdicts["accuracy"] == (pytest.approx(0.003), Verdict.IMPROVED)
    assert verdicts["citations"] == (pytest.approx(0.06), Verdict.NO_CHANGE)
    assert verdicts["privilege"][1] is Verdict.NO_CHANGE
    assert verdicts["clarity"] == (None, Verdict.TOO_FEW)
    strong = holm_verdicts({"a": comparison(-0.3, 0.001), "b": comparison(0.1, 0.02)})
    assert strong["a"][1] is Verdict.REGRESSED and strong["b"][1] is Verdict.IMPROVED


@pytest.mark.parametrize("kept", [Verdict.TOO_FEW, Verdict.INCOMPLETE, Verdict.NOT_JUDGED])
def test_holm_verdicts_keep_untested_rows_and_leave_them_out_of_the_family(kept: Verdict) -> None:
    """A row that cannot be flagged keeps its verdict (not "no detectable change", not
    "improved" for its small p) and does not count in the family: the other row's p stays 0.04."""
    verdicts = holm_verdicts(
        {
            "few": PairedComparison(4, kept, delta=0.5, p_value=0.001),
            "enough": comparison(0.1, 0.04),
        }
    )
    assert verdicts["few"] == (None, kept)
    assert verdicts["enough"] == (pytest.approx(0.04), Verdict.IMPROVED)


def brute_force(n: int, c: int, k: int) -> tuple[float, float]:
    outcomes = [1] * c + [0] * (n - c)
    draws = list(itertools.combinations(outcomes, k))
    return (
        sum(any(d) for d in draws) / len(draws),
        sum(all(d) for d in draws) / len(draws),
    )


@given(st.data())
def test_pass_at_k_and_pass_hat_k_match_enumeration(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 9))
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    at, hat = brute_force(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(at)
    assert pass_hat_k(n, c, k) == pytest.approx(hat)


def test_pass_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_mean_pass_k_averages_over_cases_with_enough_trials() -> None:
    scores: Scores = {"a": [1.0, 0.0, 0.0], "b": [1.0, 1.0, 1.0], "c": [1.0, None], "d": [0.0]}
    two = mean_pass_k(scores, 2)
    assert two is not None and two.n_cases == 2  # c has one judged trial, d one trial
    assert two.pass_at_k == pytest.approx((brute_force(3, 1, 2)[0] + 1.0) / 2)
    assert two.pass_hat_k == pytest.approx((0.0 + 1.0) / 2)
    assert mean_pass_k(scores, 4) is None
    assert is_binary(scores) and not is_binary({"a": [0.5]})
    with pytest.raises(ValueError, match="binary"):
        mean_pass_k({"a": [0.5, 1.0]}, 1)
