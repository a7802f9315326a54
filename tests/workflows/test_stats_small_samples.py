"""Small samples: the minimum case count, the exact binary test, the bound, cases_needed.

Each check is against a hand computation, a published example or an independent library
(scipy, statsmodels), never against the implementation's own formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint

from workflows.stats import (
    MIN_CASES,
    PairedTable,
    Verdict,
    mcnemar_exact_p,
    newcombe_interval,
    paired_comparison,
    paired_table,
)

Scores = dict[str, list[float | None]]


def arms(pairs: list[tuple[float, float]], trials: int = 1) -> tuple[Scores, Scores]:
    """Per case (base score, head score), repeated over `trials` agreeing trials."""
    base: Scores = {f"c{i}": [b] * trials for i, (b, _) in enumerate(pairs)}
    head: Scores = {f"c{i}": [h] * trials for i, (_, h) in enumerate(pairs)}
    return base, head


def table_arms(both: int, head_only: int, base_only: int, neither: int) -> tuple[Scores, Scores]:
    pairs = [(1.0, 1.0)] * both + [(0.0, 1.0)] * head_only
    pairs += [(1.0, 0.0)] * base_only + [(0.0, 0.0)] * neither
    return arms(pairs)


# --- the exact McNemar test ---------------------------------------------------------------


def test_exact_mcnemar_p_matches_a_hand_computation_and_scipy() -> None:
    """1 case went fail → pass and 7 pass → fail. With no change, each of the 8 discordant cases
    is a coin flip: P(at most 1 of 8) = (1 + 8) / 256, two-sided 18/256 = 0.0703."""
    assert mcnemar_exact_p(1, 7) == pytest.approx(18 / 256, rel=1e-12)
    assert mcnemar_exact_p(7, 1) == pytest.approx(18 / 256, rel=1e-12)
    assert mcnemar_exact_p(1, 7) == pytest.approx(sps.binomtest(1, 8, 0.5).pvalue, rel=1e-12)
    assert mcnemar_exact_p(3, 3) == 1.0
    assert mcnemar_exact_p(0, 0) == 1.0
    base, head = table_arms(both=3, head_only=1, base_only=7, neither=1)
    result = paired_comparison(base, head)
    assert (result.method, result.n) == ("exact binary", 12)
    assert result.p_value == pytest.approx(18 / 256, rel=1e-12)
    assert result.delta == pytest.approx(-6 / 12)
    # Not significant, though the paired t on the same cases says p = 0.03.
    assert result.verdict is Verdict.NO_CHANGE
    t_test = sps.ttest_rel([h[0] for h in head.values()], [b[0] for b in base.values()])
    assert t_test.pvalue < 0.05


def test_exact_mcnemar_reproduces_the_published_conditional_test() -> None:
    """Cavo et al. (2012) as analysed in Fagerland, Lydersen & Laake, "Statistical Analysis of
    Contingency Tables" (2017), ch. 8: 6 and 16 discordant pairs, exact conditional P = 0.052479."""
    assert mcnemar_exact_p(6, 16) == pytest.approx(0.052479, abs=5e-7)


def test_four_of_five_going_from_fail_to_pass_is_too_few_with_exact_p() -> None:
    """The old paired t said p ≈ 0.016 here; the exact test says 2 · (1/2)^4 = 0.125."""
    result = paired_comparison(*arms([(0.0, 1.0)] * 4 + [(0.0, 0.0)]))
    assert (result.method, result.verdict, result.n) == ("exact binary", Verdict.TOO_FEW, 5)
    assert result.p_value == 0.125
    assert result.delta == pytest.approx(0.8)
    assert result.cases_needed is not None and result.cases_needed >= MIN_CASES
    assert sps.ttest_rel([1.0] * 4 + [0.0], [0.0] * 5).pvalue == pytest.approx(0.016, abs=0.001)


def test_agreeing_trials_count_as_binary_and_one_split_case_does_not() -> None:
    pairs = [(0.0, 1.0)] * 3 + [(1.0, 1.0)] * 6 + [(0.0, 0.0)] * 3
    base, head = arms(pairs, trials=3)
    assert paired_comparison(base, head).method == "exact binary"
    head["c0"] = [1.0, 1.0, 0.0]
    assert paired_comparison(base, head).method == "t"


def test_min_cases_is_a_parameter() -> None:
    six = arms([(0.0, 1.0)] * 6)
    assert paired_comparison(*six).verdict is Verdict.TOO_FEW
    result = paired_comparison(*six, min_cases=5)
    assert result.p_value == pytest.approx(2 / 64)
    assert (result.verdict, result.cases_needed) == (Verdict.IMPROVED, None)


# --- Newcombe's interval ------------------------------------------------------------------


def test_newcombe_interval_reproduces_the_published_example() -> None:
    """Cavo et al. (2012): 59 both, 6 first only, 16 second only, 80 neither; Newcombe's
    square-and-add interval (method 10) −0.1186 to −0.0046 (Fagerland et al. 2017, ch. 8).
    Without the continuity correction of φ the lower limit would be −0.1174."""
    low, high = newcombe_interval(PairedTable(59, 6, 16, 80), 0.05)
    assert (low, high) == pytest.approx((-0.1186, -0.0046), abs=5e-5)
    result = paired_comparison(*table_arms(59, 6, 16, 80))
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high), rel=1e-12)
    assert result.delta == pytest.approx(-10 / 161)
    assert result.verdict is Verdict.NO_CHANGE  # exact p = 0.052, though the interval excludes 0


def independent_newcombe(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 written out from the paper, with statsmodels' Wilson limits."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = proportion_confint(a + b, n, alpha=0.05, method="wilson")
    l2, u2 = proportion_confint(a + c, n, alpha=0.05, method="wilson")
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    numerator = a * d - b * c
    if numerator > 0:
        numerator = max(numerator - n / 2, 0)
    phi = 0.0 if margins == 0 else numerator / math.sqrt(margins)
    lower = p1 - p2 - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    upper = p1 - p2 + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return lower, upper


@pytest.mark.parametrize(
    "table",
    [
        (8, 4, 1, 7),  # ad > bc by more than n/2: corrected φ
        (3, 1, 4, 2),  # 0 < ad − bc < n/2: φ = 0
        (2, 7, 1, 0),  # ad < bc: negative φ, uncorrected
        (10, 0, 0, 2),  # no discordant case
        (0, 4, 0, 6),  # base never passes: an empty margin, φ = 0
        (0, 0, 5, 5),  # head never passes
    ],
)
def test_newcombe_interval_matches_an_independent_computation(
    table: tuple[int, int, int, int],
) -> None:
    expected = independent_newcombe(*table)
    low, high = newcombe_interval(PairedTable(*table), 0.05)
    assert (low, high) == pytest.approx(expected, abs=1e-12)
    assert low < PairedTable(*table).delta < high or PairedTable(*table).delta in (low, high)
    assert high - low > 0
    # Swapping the arms mirrors the interval.
    both, head_only, base_only, neither = table
    swapped = newcombe_interval(PairedTable(both, base_only, head_only, neither), 0.05)
    assert swapped == pytest.approx((-high, -low), abs=1e-12)


def test_paired_table_counts_by_arm() -> None:
    base = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    head = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    assert paired_table(base, head) == PairedTable(both=1, head_only=2, base_only=1, neither=1)
    with pytest.raises(ValueError, match="0s and 1s"):
        paired_table(np.array([0.5]), np.array([1.0]))


# --- the bound, when every case moved alike ------------------------------------------------


def test_eight_cases_all_up_by_half_are_not_certain() -> None:
    """The reported defect: [+0.5, +0.5] and p = 0. Now: the bound's interval and p, too few."""
    result = paired_comparison(*arms([(0.25, 0.75)] * 8), bootstrap=1000)
    q = 1 - 0.025 ** (1 / 8)
    assert (result.method, result.verdict) == ("bound", Verdict.TOO_FEW)
    assert result.p_value == pytest.approx(2 * 1.5**-8)  # 0.078
    assert (result.ci_low, result.ci_high) == pytest.approx((0.5 - q * 1.5, 0.5 + q * 0.5))
    assert result.ci_low < 0 < 0.5 < result.ci_high
    assert result.mde == pytest.approx(40 ** (1 / 8) - 1)
    assert result.cases_needed == 10  # 2 · 1.5^-10 = 0.035 < 0.05, 2 · 1.5^-9 = 0.052
    assert (result.boot_low, result.boot_high, result.intervals_disagree) == (None, None, False)
    ten = paired_comparison(*arms([(0.25, 0.75)] * 10))
    assert ten.verdict is Verdict.IMPROVED and ten.ci_low > 0
    assert ten.p_value == pytest.approx(2 * 1.5**-10)


@pytest.mark.parametrize("n", [2, 5, 10, 30])
def test_bound_interval_and_p_agree(n: int) -> None:
    """The interval excludes 0 exactly when p < 0.05, and a move of exactly the MDE sits on
    the boundary (p = 0.05)."""
    for delta in np.linspace(-0.9, 0.9, 37):
        result = paired_comparison(*arms([((1 - delta) / 2, (1 + delta) / 2)] * n), min_cases=2)
        if abs(delta) < 1e-9:
            assert result.p_value == 1.0 and result.ci_low < 0 < result.ci_high
            continue
        excludes = result.ci_low > 0 or result.ci_high < 0
        assert excludes == (result.p_value < 0.05), (n, delta)
    edge = (2 / 0.05) ** (1 / n) - 1
    if edge < 0.95:
        at_mde = paired_comparison(*arms([(0.0, edge)] * n), min_cases=2)
        assert at_mde.p_value == pytest.approx(0.05)
        assert at_mde.mde == pytest.approx(edge)


@pytest.mark.parametrize("n", [3, 8, 10, 20])
def test_bound_p_is_valid_under_the_least_favourable_null(n: int) -> None:
    """E[d] = 0 with d ∈ [−1, 1] and d = δ as likely as possible: d = δ with probability
    1 / (1 + δ), else −1. All n cases then equal δ with probability (1 + δ)^−n, and that sample
    is the only one the bound sees; so it may reject it (in that direction) only if
    (1 + δ)^−n ≤ α/2. With 8 cases and δ = 0.5 that is 0.039: no rejection."""
    for delta in np.linspace(0.05, 0.95, 19):
        base, head = arms([((1 - delta) / 2, (1 + delta) / 2)] * n)
        result = paired_comparison(base, head, min_cases=2)
        assert result.method == "bound"
        rejects = result.p_value is not None and result.p_value < 0.05
        assert (1 + delta) ** -n * rejects <= 0.025, (n, delta)
        assert rejects == ((1 + delta) ** -n < 0.025)  # ... and it does when it may


# --- never p = 0, never a zero-width interval ------------------------------------------------


def test_extreme_data_never_give_p_zero() -> None:
    huge_t = arms([(0.2, 0.7 + 1e-9 * (i % 3)) for i in range(2000)])
    all_flip = arms([(0.0, 1.0)] * 2000)
    same_move = arms([(0.0, 0.75)] * 3000)
    for base, head in (huge_t, all_flip, same_move):
        result = paired_comparison(base, head)
        assert result.p_value is not None and 0 < result.p_value < 1e-300
        assert result.ci_low < result.ci_high
        assert result.verdict is Verdict.IMPROVED


score = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(0, 1)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(score, min_size=1, max_size=3), st.lists(score, min_size=1, max_size=3)),
        min_size=2,
        max_size=40,
    ),
    st.booleans(),
)
def test_no_p_of_zero_and_no_zero_width_interval(
    cases: list[tuple[list[float], list[float]]], shift: bool
) -> None:
    base: Scores = {f"c{i}": list(b) for i, (b, _) in enumerate(cases)}
    head: Scores = {f"c{i}": list(h) for i, (_, h) in enumerate(cases)}
    if shift:  # every case moves by 0.3 (up to rounding): the degenerate path
        base = {k: [0.6 * v for v in vs if v is not None] for k, vs in base.items()}
        head = {k: [v + 0.3 for v in vs] for k, vs in base.items()}
    result = paired_comparison(base, head)
    assert result.p_value is not None and 0 < result.p_value <= 1
    assert result.ci_low is not None and result.ci_high is not None
    assert result.ci_low < result.ci_high
    assert result.ci_low >= -1 and result.ci_high <= 1  # the possible differences
    assert result.method in {"exact binary", "t", "bound"}
    if result.n < MIN_CASES:
        assert result.verdict is Verdict.TOO_FEW


# --- cases_needed ---------------------------------------------------------------------------


def mde(n: int, sd: float) -> float:
    """MDE at 80% power from statsmodels' noncentral-t solver (independent of our formula)."""
    return float(TTestPower().solve_power(nobs=n, alpha=0.05, power=0.8)) * sd


def test_cases_needed_brings_the_mde_below_the_observed_delta() -> None:
    rng = np.random.default_rng(3)
    base: Scores = {f"c{i}": list(rng.uniform(0.3, 0.7, 3)) for i in range(15)}
    head: Scores = {k: [v + 0.04 + rng.normal(0, 0.15) for v in vs] for k, vs in base.items()}
    head = {k: [float(np.clip(v, 0, 1)) for v in vs] for k, vs in head.items()}
    result = paired_comparison(base, head)
    assert result.verdict is Verdict.NO_CHANGE and result.delta is not None and result.sd
    needed = result.cases_needed
    assert needed is not None and needed > 15
    size = abs(result.delta)
    assert result.mde is not None and result.mde > size  # not detectable now ...
    # ... detectable with `needed` cases and not with one fewer (our MDE uses t quantiles; the
    # noncentral-t solver agrees to within a case or two).
    factor = [sps.t.ppf(0.975, n - 1) + sps.t.ppf(0.8, n - 1) for n in (needed - 1, needed)]
    assert factor[1] * result.sd / math.sqrt(needed) <= size
    assert factor[0] * result.sd / math.sqrt(needed - 1) > size
    assert mde(needed + 2, result.sd) <= size <= mde(needed - 2, result.sd)
    power = TTestPower().power(effect_size=size / result.sd, nobs=needed, alpha=0.05)
    assert power == pytest.approx(0.8, abs=0.02)


def test_cases_needed_is_only_where_a_reader_needs_it() -> None:
    changed = paired_comparison(*arms([(0.2, 0.9 - 0.01 * (i % 4)) for i in range(12)]))
    assert changed.verdict is Verdict.IMPROVED and changed.cases_needed is None
    aa = paired_comparison(*arms([(0.5, 0.5)] * 12))
    assert aa.verdict is Verdict.NO_CHANGE and aa.cases_needed is None  # Δ = 0
    one = paired_comparison(*arms([(0.0, 1.0)]))
    assert one.cases_needed is None  # no sd to use
    few = paired_comparison(*arms([(0.2, 0.25), (0.3, 0.2), (0.5, 0.6)]))
    assert few.verdict is Verdict.TOO_FEW and few.cases_needed is not None
    assert few.cases_needed >= MIN_CASES
