"""Bootstrap interval, flips, noise floor and A/A calibration, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from workflows.stats import (
    Verdict,
    case_flips,
    holm_verdicts,
    noise_floor,
    paired_bootstrap_ci,
    paired_comparison,
    trial_disagreement,
)

Scores = dict[str, list[float | None]]


@pytest.mark.parametrize(("n", "seed"), [(8, 1), (30, 2), (120, 3)])
def test_bootstrap_matches_scipy_percentile_bootstrap(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.normal(0.05, 0.3, n)
    ours = paired_bootstrap_ci(d, resamples=40_000, seed=seed)
    reference = sps.bootstrap(
        (d,),
        np.mean,
        confidence_level=0.95,
        n_resamples=40_000,
        method="percentile",
        random_state=np.random.default_rng(seed + 100),
    ).confidence_interval
    se = d.std(ddof=1) / math.sqrt(n)
    assert ours[0] == pytest.approx(reference.low, abs=0.05 * se)
    assert ours[1] == pytest.approx(reference.high, abs=0.05 * se)


def test_bootstrap_is_close_to_the_t_interval_for_many_cases() -> None:
    d = np.random.default_rng(4).normal(0.1, 0.25, 400)
    t = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    low, high = paired_bootstrap_ci(d, resamples=20_000)
    assert (low, high) == pytest.approx((t.low, t.high), abs=0.03 * (t.high - t.low))


def test_bootstrap_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(5)
    covered = 0
    for _ in range(400):
        d = rng.normal(0.2, 1.0, 40)
        low, high = paired_bootstrap_ci(d, resamples=1000, seed=int(rng.integers(1 << 30)))
        covered += low <= 0.2 <= high
    assert 0.90 <= covered / 400 <= 0.98


def test_bootstrap_is_deterministic_and_degenerate_data_give_a_point() -> None:
    d = np.array([0.1, -0.2, 0.3, 0.0])
    assert paired_bootstrap_ci(d, seed=3) == paired_bootstrap_ci(d, seed=3)
    assert paired_bootstrap_ci(np.full(5, 0.25)) == pytest.approx((0.25, 0.25))
    with pytest.raises(ValueError):
        paired_bootstrap_ci(np.array([]))


def test_paired_comparison_reports_the_bootstrap_and_whether_intervals_disagree() -> None:
    base: Scores = {f"c{i}": [0.5] for i in range(10)}
    head: Scores = {f"c{i}": [0.5 + (0.3 if i < 6 else -0.2)] for i in range(10)}
    result = paired_comparison(base, head, bootstrap=4000)
    assert result.boot_low is not None and result.boot_high is not None
    assert result.boot_low <= result.delta <= result.boot_high
    expected = (result.ci_low > 0 or result.ci_high < 0) != (
        result.boot_low > 0 or result.boot_high < 0
    )
    assert result.intervals_disagree is expected
    assert paired_comparison(base, head).boot_low is None  # off unless asked for


def test_flips_follow_the_majority_of_trials() -> None:
    base: Scores = {"a": [1.0, 1.0, 0.0], "b": [0.0, 0.0, 1.0], "c": [1.0], "d": [0.0], "e": []}
    head: Scores = {"a": [0.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [1.0], "d": [0.0], "e": [1.0]}
    result = paired_comparison(base, head)
    assert (result.pass_to_fail, result.fail_to_pass) == (("a",), ("b",))
    flips = case_flips({"x": 0.5, "y": 0.49}, {"x": 0.49, "y": 0.5}, ["x", "y"])
    assert (flips.pass_to_fail, flips.fail_to_pass, flips.count) == (("x",), ("y",), 2)


def simulate_components(
    n_cases: int, trials: int, sigma_w: float, tau: float, seed: int
) -> tuple[Scores, Scores]:
    """Normal scores: level per case, true per-case difference ~ N(0, tau), trial noise sigma_w."""
    rng = np.random.default_rng(seed)
    base: Scores = {}
    head: Scores = {}
    for i in range(n_cases):
        level, shift = rng.normal(0, 1), rng.normal(0, tau)
        base[f"c{i}"] = list(level + rng.normal(0, sigma_w, trials))
        head[f"c{i}"] = list(level + shift + rng.normal(0, sigma_w, trials))
    return base, head


def test_noise_floor_recovers_known_variance_components() -> None:
    floor = noise_floor(*simulate_components(4000, 3, sigma_w=0.3, tau=0.2, seed=6))
    assert floor is not None
    assert floor.within_var == pytest.approx(0.09, rel=0.04)
    assert floor.between_var == pytest.approx(0.04, rel=0.12)
    assert floor.trials == pytest.approx(3)


def test_projected_mde_at_the_current_trials_is_the_measured_mde() -> None:
    base, head = simulate_components(25, 4, sigma_w=0.3, tau=0.1, seed=7)
    floor = noise_floor(base, head)
    measured = paired_comparison(base, head)
    assert floor is not None and floor.between_var > 0
    assert floor.mde(4) == pytest.approx(measured.mde)


def test_projected_mde_predicts_the_mde_of_experiments_with_more_trials() -> None:
    """Estimate from a pilot (200 cases × 2 trials), project to 30 cases × 8 trials; compare with
    the average MDE measured in such experiments, and with statsmodels' power solver on the true
    sd of the differences."""
    sigma_w, tau, n = 0.4, 0.15, 30
    projected = []
    for seed in range(20):
        floor = noise_floor(*simulate_components(200, 2, sigma_w, tau, seed))
        assert floor is not None
        projected.append(floor.mde(8, n_cases=n))
    measured = [
        paired_comparison(*simulate_components(n, 8, sigma_w, tau, 1000 + seed)).mde
        for seed in range(100)
    ]
    true_sd = math.sqrt(tau**2 + 2 * sigma_w**2 / 8)
    effect = TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8)
    assert np.mean(projected) == pytest.approx(effect * true_sd, rel=0.05)
    assert np.mean(measured) == pytest.approx(effect * true_sd, rel=0.05)


def test_noise_floor_needs_repeated_trials_and_two_cases() -> None:
    assert noise_floor({"a": [1.0], "b": [0.0]}, {"a": [1.0], "b": [1.0]}) is None
    assert noise_floor({"a": [1.0, 0.0]}, {"a": [1.0, 1.0]}) is None


def test_trial_disagreement_counts_cases_whose_trials_disagree() -> None:
    scores: Scores = {"a": [1.0, 1.0], "b": [1.0, 0.0, None], "c": [0.2, 0.9], "d": [1.0]}
    assert trial_disagreement(scores) == pytest.approx(2 / 3)
    assert trial_disagreement({"a": [1.0]}) is None


def aa_criteria(seed: int, n_cases: int = 30, trials: int = 3, n_criteria: int = 12) -> dict:
    """An A/A experiment: both arms draw each case's pass/fail from the same probability."""
    rng = np.random.default_rng(seed)
    criteria = {}
    for c in range(n_criteria):
        p = rng.uniform(0.1, 0.9, (n_cases, 1))
        draws = (rng.random((2, n_cases, trials)) < p).astype(float).tolist()
        arms = [{f"case{i}": draws[a][i] for i in range(n_cases)} for a in range(2)]
        criteria[f"criterion-{c}"] = paired_comparison(arms[0], arms[1])
    return criteria


def test_simulated_aa_experiments_flag_at_most_about_5_percent() -> None:
    """400 A/A experiments × 12 binary criteria: uncorrected tests reject about 5% of criteria
    (the t test is calibrated on this data); after Holm, about 5% of experiments or fewer have
    any criterion flagged, and far fewer than 5% of criteria are."""
    seeds = range(400)
    raw = flagged = experiments_flagged = 0
    for seed in seeds:
        comparisons = aa_criteria(seed)
        raw += sum(c.verdict.is_change for c in comparisons.values())
        verdicts = holm_verdicts(comparisons)
        hits = sum(v.is_change for _, v in verdicts.values())
        flagged += hits
        experiments_flagged += hits > 0
    tests = len(seeds) * 12
    assert 0.035 <= raw / tests <= 0.065
    assert flagged / tests <= 0.01
    assert experiments_flagged / len(seeds) <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / len(seeds))


def test_a_real_effect_is_still_found_after_the_correction() -> None:
    rng = np.random.default_rng(9)
    base = {f"c{i}": list((rng.random(3) < 0.4).astype(float)) for i in range(60)}
    head = {f"c{i}": list((rng.random(3) < 0.75).astype(float)) for i in range(60)}
    comparisons = {**aa_criteria(9, n_criteria=11), "real": paired_comparison(base, head)}
    assert holm_verdicts(comparisons)["real"][1] is Verdict.IMPROVED
