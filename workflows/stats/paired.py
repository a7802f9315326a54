"""Paired comparison of two arms by case: Δ, interval, p-value, MDE, bootstrap cross-check.

See docs/statistics.md for the method. Inputs are per-arm mappings `case_id -> trial scores`
in [0, 1] (None = not judged, ignored); errored trials are simply absent.

Three ways to a p-value and interval, by the data (`PairedComparison.method`):

- "exact binary": every per-case mean in both arms is 0 or 1 — the exact McNemar test and
  Newcombe's interval (workflows/stats/binary.py);
- "bound": every per-case difference is the same — a distribution-free bound (the rule of three
  applied to bounded scores), since the t statistic is undefined and the data cannot show how
  rare a different move might be;
- "t": otherwise, the paired t on per-case means (the case-clustered standard error).

With fewer than `min_cases` paired cases the verdict is "too few cases" whatever the test says.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
from scipy.special import ndtri, stdtr, stdtrit  # sps.norm/sps.t without their overhead

from workflows.stats.binary import is_binary_means, mcnemar_exact_p, newcombe_interval, paired_table
from workflows.stats.bootstrap import paired_bootstrap_ci
from workflows.stats.flips import case_flips

ALPHA = 0.05
POWER = 0.8
MIN_CASES = 10  # fewer paired cases than this: "too few cases", whatever the test says
SMALLEST_P = sys.float_info.min  # a p-value is never reported as 0
_DEGENERATE = 1e-12  # an sd this small (relative to |Δ|, at least 1) counts as zero
_MANY_CASES = 1e7  # beyond this many cases, cases_needed uses the normal approximation

EXACT_BINARY = "exact binary"
T_TEST = "t"
BOUND = "bound"
NO_TEST = ""  # fewer than two paired cases: no interval, no p-value

TrialScores = Mapping[str, Sequence[float | None]]


class Verdict(StrEnum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    NO_CHANGE = "no detectable change"
    TOO_FEW = "too few cases"
    INCOMPLETE = "incomplete"
    NOT_JUDGED = "not judged"

    @property
    def is_change(self) -> bool:
        return self in {Verdict.IMPROVED, Verdict.REGRESSED}


@dataclass(frozen=True)
class PairedComparison:
    """head − base, paired by case. Means are over the paired cases of per-case trial means."""

    n: int
    verdict: Verdict  # uncorrected (p < alpha), or TOO_FEW below min_cases
    base_mean: float | None = None
    head_mean: float | None = None
    delta: float | None = None
    sd: float | None = None  # of the per-case differences
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None  # never 0
    mde: float | None = None  # minimum detectable |Δ| at 80% power with this n and sd
    dropped: tuple[str, ...] = ()  # cases run in both arms, with no usable score in one
    pending: tuple[str, ...] = ()  # cases present in one arm only (the other has not run yet)
    boot_low: float | None = None  # paired bootstrap percentile interval (when asked for)
    boot_high: float | None = None
    pass_to_fail: tuple[str, ...] = ()  # paired cases that passed in base and fail in head
    fail_to_pass: tuple[str, ...] = ()
    method: str = NO_TEST  # EXACT_BINARY, T_TEST, BOUND or NO_TEST
    # On "too few cases" and "no detectable change" rows with Δ ≠ 0: the paired cases at which
    # an effect of the observed |Δ| with the observed sd would be detected with 80% power.
    cases_needed: int | None = None

    @property
    def intervals_disagree(self) -> bool:
        """The main and bootstrap intervals disagree on whether 0 is a plausible Δ."""
        if None in (self.ci_low, self.ci_high, self.boot_low, self.boot_high):
            return False
        t_excludes = not (self.ci_low or 0.0) <= 0.0 <= (self.ci_high or 0.0)
        boot_excludes = not (self.boot_low or 0.0) <= 0.0 <= (self.boot_high or 0.0)
        return t_excludes != boot_excludes


def case_means(scores: TrialScores) -> dict[str, float]:
    """Per case, the mean of its judged trial scores; cases without any are left out."""
    means: dict[str, float] = {}
    for case_id, values in scores.items():
        judged = [v for v in values if v is not None]
        if judged:
            means[case_id] = math.fsum(judged) / len(judged)
    return means


def paired_comparison(
    base: TrialScores,
    head: TrialScores,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    bootstrap: int = 0,
    min_cases: int = MIN_CASES,
) -> PairedComparison:
    """Compare head with base on the cases both have a judged score for.

    A case in both mappings without a judged score in one of them (all its trials errored or
    were not judged) is `dropped`; a case in one mapping only is `pending` (not yet run).
    With fewer than `min_cases` paired cases the verdict is TOO_FEW; Δ, the means and (from two
    cases on) the interval and p are still given, for information.
    `bootstrap` > 0 adds a paired bootstrap interval from that many resamples."""
    base_means, head_means = case_means(base), case_means(head)
    paired = [c for c in head_means if c in base_means]
    dropped = tuple(sorted((set(base) & set(head)) - set(paired)))
    pending = tuple(sorted(set(base) ^ set(head)))
    b = np.array([base_means[c] for c in paired], dtype=float)
    h = np.array([head_means[c] for c in paired], dtype=float)
    flips = case_flips(base_means, head_means, paired)
    result = replace(
        _compare(b, h, alpha, power, min_cases),
        dropped=dropped,
        pending=pending,
        pass_to_fail=flips.pass_to_fail,
        fail_to_pass=flips.fail_to_pass,
    )
    # Resampling identical differences gives the point [Δ, Δ]: no information, so none is shown.
    if bootstrap and len(paired) >= 2 and result.method != BOUND:
        low, high = paired_bootstrap_ci(h - b, alpha=alpha, resamples=bootstrap)
        result = replace(result, boot_low=low, boot_high=high)
    return result


def _compare(
    b: np.ndarray, h: np.ndarray, alpha: float, power: float, min_cases: int
) -> PairedComparison:
    n = len(b)
    if n == 0:
        return PairedComparison(0, Verdict.TOO_FEW)
    d = h - b
    delta = float(np.mean(d))
    untested = PairedComparison(n, Verdict.TOO_FEW, float(np.mean(b)), float(np.mean(h)), delta)
    if n < 2:
        return untested
    sd = float(np.std(d, ddof=1))
    if sd <= _DEGENERATE * max(1.0, abs(delta)):
        sd = 0.0
        if abs(delta) <= _DEGENERATE:
            delta = 0.0
    if is_binary_means(b) and is_binary_means(h):
        tested = _exact_binary(untested, b, h, sd, alpha, power)
    elif sd == 0.0:
        tested = _bound(replace(untested, delta=delta), alpha)
    else:
        tested = _t(untested, sd, alpha, power, span=max(1.0, float(np.max(np.abs(d)))))
    tested = replace(tested, p_value=max(SMALLEST_P, tested.p_value or 0.0))
    verdict = Verdict.TOO_FEW
    if n >= min_cases:
        verdict = verdict_for(tested.delta, tested.p_value, alpha)
    needed = None
    if verdict in (Verdict.TOO_FEW, Verdict.NO_CHANGE):
        needed = cases_needed(tested.delta, sd, alpha=alpha, power=power, min_cases=min_cases)
    return replace(tested, verdict=verdict, cases_needed=needed)


def _t(
    result: PairedComparison, sd: float, alpha: float, power: float, span: float
) -> PairedComparison:
    """The paired t: Δ ± t_{1−α/2, n−1} · sd/√n, clipped to the possible differences [−1, 1]
    (wider only if scores outside [0, 1] were passed: [−span, span])."""
    n, delta = result.n, result.delta or 0.0
    se = sd / math.sqrt(n)
    t_crit = float(stdtrit(n - 1, 1 - alpha / 2))
    return replace(
        result,
        method=T_TEST,
        sd=sd,
        ci_low=max(-span, delta - t_crit * se),
        ci_high=min(span, delta + t_crit * se),
        p_value=float(2 * stdtr(n - 1, -abs(delta) / se)),
        mde=_t_mde(n, sd, alpha, power),
    )


def _exact_binary(
    result: PairedComparison, b: np.ndarray, h: np.ndarray, sd: float, alpha: float, power: float
) -> PairedComparison:
    """Every per-case mean is 0 or 1: exact McNemar p, Newcombe interval (binary.py)."""
    table = paired_table(b, h)
    low, high = newcombe_interval(table, alpha)
    return replace(
        result,
        method=EXACT_BINARY,
        delta=table.delta,
        sd=sd,
        ci_low=low,
        ci_high=high,
        p_value=mcnemar_exact_p(table.head_only, table.base_only),
        mde=_t_mde(result.n, sd, alpha, power) if sd > 0 else bound_mde(result.n, alpha),
    )


def _bound(result: PairedComparison, alpha: float) -> PairedComparison:
    """Every case moved by the same δ (sd = 0): the distribution-free bound.

    d lies in [−1, 1]. With confidence 1 − α/2, at most a share q = 1 − (α/2)^(1/n) of the
    population of cases moves differently (the exact form of the rule of three), and such a case can
    differ by at most the score range; so Δ ∈ [δ − q(δ + 1), δ + q(1 − δ)]. The p-value is the
    α at which that interval touches 0, p = min(1, 2(1 + |δ|)^(−n)) — a valid test, since under
    E[d] = 0 with d ∈ [−1, 1], Markov's inequality gives P(d = δ) ≤ 1 / (1 + |δ|)."""
    n, delta = result.n, result.delta or 0.0
    span = max(1.0, abs(delta))  # scores outside [0, 1] would widen the range
    q = 1.0 - (alpha / 2) ** (1.0 / n)
    return replace(
        result,
        method=BOUND,
        sd=0.0,
        ci_low=max(-span, delta - q * (delta + span)),
        ci_high=min(span, delta + q * (span - delta)),
        p_value=bound_p(delta, n, span),
        mde=bound_mde(n, alpha),
    )


def bound_p(delta: float, n: int, span: float = 1.0) -> float:
    """min(1, 2(1 + |δ|/span)^(−n)): the bound's two-sided p-value for n identical differences."""
    return min(1.0, 2.0 * math.exp(-n * math.log1p(abs(delta) / span)))


def bound_mde(n: int, alpha: float = ALPHA) -> float:
    """The smallest identical difference the bound detects with n cases: (2/α)^(1/n) − 1."""
    return float((2.0 / alpha) ** (1.0 / n) - 1.0)


def _t_mde(n: int, sd: float, alpha: float, power: float) -> float:
    factor = float(stdtrit(n - 1, 1 - alpha / 2) + stdtrit(n - 1, power))
    return factor * sd / math.sqrt(n)


def cases_needed(
    delta: float | None,
    sd: float | None,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    min_cases: int = MIN_CASES,
) -> int | None:
    """The number of paired cases at which an effect of |delta| with this sd would be detected
    with `power`: the smallest n whose MDE is at most |delta| (the t formula; for sd = 0 the
    bound's MDE), and at least min_cases. None when delta is 0 or there is no sd."""
    if delta is None or sd is None or abs(delta) <= _DEGENERATE or not math.isfinite(sd):
        return None
    size = abs(delta)
    if sd == 0.0:
        needed = max(1, math.ceil(math.log(2.0 / alpha) / math.log1p(size)))
        while needed > 1 and bound_mde(needed - 1, alpha) <= size:
            needed -= 1
        while bound_mde(needed, alpha) > size:
            needed += 1
        return max(min_cases, needed)
    z = float(ndtri(1 - alpha / 2) + ndtri(power))
    # With power > 1/2 the normal approximation is a lower bound (t quantiles exceed z's).
    normal = (z * sd / size) ** 2
    if normal > _MANY_CASES:  # t and normal quantiles agree to far better than a case here
        return math.ceil(normal)
    start = max(2, math.floor(normal)) if power > 0.5 else 2
    block = 64
    while True:
        candidates = np.arange(start, start + block)
        dof = (candidates - 1).astype(float)
        factor = stdtrit(dof, 1 - alpha / 2) + stdtrit(dof, power)
        enough = np.nonzero(factor * sd / np.sqrt(candidates) <= size)[0]
        if len(enough):
            return max(min_cases, int(candidates[enough[0]]))
        start += block
        block *= 2


def verdict_for(delta: float | None, p_value: float | None, alpha: float = ALPHA) -> Verdict:
    """Improved/regressed when p < alpha, by the sign of Δ (no case-count rule: see
    paired_comparison for TOO_FEW)."""
    if delta is None or p_value is None:
        return Verdict.TOO_FEW
    if p_value >= alpha or delta == 0:
        return Verdict.NO_CHANGE
    return Verdict.IMPROVED if delta > 0 else Verdict.REGRESSED
