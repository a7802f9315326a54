"""Paired comparison of two arms by case: Δ, t interval, p-value, MDE, bootstrap cross-check.

See docs/statistics.md for the method. Inputs are per-arm mappings `case_id -> trial scores`
(None = not judged, ignored); errored trials are simply absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
from scipy import stats as sps

from workflows.stats.bootstrap import paired_bootstrap_ci
from workflows.stats.flips import case_flips

ALPHA = 0.05
POWER = 0.8
_DEGENERATE = 1e-12  # an sd this small (relative to |Δ|, at least 1) counts as zero

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
    verdict: Verdict  # uncorrected (CI at 1 − alpha)
    base_mean: float | None = None
    head_mean: float | None = None
    delta: float | None = None
    sd: float | None = None  # of the per-case differences
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    mde: float | None = None  # minimum detectable |Δ| at 80% power with this n and sd
    dropped: tuple[str, ...] = ()  # cases run in both arms, with no usable score in one
    pending: tuple[str, ...] = ()  # cases present in one arm only (the other has not run yet)
    boot_low: float | None = None  # paired bootstrap percentile interval (when asked for)
    boot_high: float | None = None
    pass_to_fail: tuple[str, ...] = ()  # paired cases that passed in base and fail in head
    fail_to_pass: tuple[str, ...] = ()

    @property
    def intervals_disagree(self) -> bool:
        """The t and bootstrap intervals disagree on whether 0 is a plausible Δ."""
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
) -> PairedComparison:
    """Compare head with base on the cases both have a judged score for.

    A case in both mappings without a judged score in one of them (all its trials errored or
    were not judged) is `dropped`; a case in one mapping only is `pending` (not yet run).
    `bootstrap` > 0 adds a paired bootstrap interval from that many resamples."""
    base_means, head_means = case_means(base), case_means(head)
    paired = [c for c in head_means if c in base_means]
    dropped = tuple(sorted((set(base) & set(head)) - set(paired)))
    pending = tuple(sorted(set(base) ^ set(head)))
    b = np.array([base_means[c] for c in paired], dtype=float)
    h = np.array([head_means[c] for c in paired], dtype=float)
    flips = case_flips(base_means, head_means, paired)
    result = replace(
        _compare(b, h, alpha, power, dropped),
        pending=pending,
        pass_to_fail=flips.pass_to_fail,
        fail_to_pass=flips.fail_to_pass,
    )
    if bootstrap and len(paired) >= 2:
        low, high = paired_bootstrap_ci(h - b, alpha=alpha, resamples=bootstrap)
        result = replace(result, boot_low=low, boot_high=high)
    return result


def _compare(
    b: np.ndarray, h: np.ndarray, alpha: float, power: float, dropped: tuple[str, ...]
) -> PairedComparison:
    n = len(b)
    if n == 0:
        return PairedComparison(0, Verdict.TOO_FEW, dropped=dropped)
    d = h - b
    delta = float(np.mean(d))
    base = PairedComparison(
        n, Verdict.TOO_FEW, float(np.mean(b)), float(np.mean(h)), delta, dropped=dropped
    )
    if n < 2:
        return base
    sd = float(np.std(d, ddof=1))
    if sd <= _DEGENERATE * max(1.0, abs(delta)):
        return _degenerate(base)
    se = sd / math.sqrt(n)
    t_crit = float(sps.t.ppf(1 - alpha / 2, n - 1))
    p = float(2 * sps.t.sf(abs(delta) / se, n - 1))
    return replace(
        base,
        verdict=verdict_for(delta, p, alpha),
        sd=sd,
        ci_low=delta - t_crit * se,
        ci_high=delta + t_crit * se,
        p_value=p,
        mde=(t_crit + float(sps.t.ppf(power, n - 1))) * se,
    )


def _degenerate(base: PairedComparison) -> PairedComparison:
    """Every case moved by exactly the same amount: the interval is that amount, [Δ, Δ]."""
    delta = base.delta or 0.0
    if abs(delta) <= _DEGENERATE:
        delta = 0.0
    p = 1.0 if delta == 0.0 else 0.0
    return replace(
        base,
        verdict=verdict_for(delta, p),
        delta=delta,
        sd=0.0,
        ci_low=delta,
        ci_high=delta,
        p_value=p,
        mde=0.0,
    )


def verdict_for(delta: float | None, p_value: float | None, alpha: float = ALPHA) -> Verdict:
    """Improved/regressed when p < alpha (the 1 − alpha CI excludes 0), by the sign of Δ."""
    if delta is None or p_value is None:
        return Verdict.TOO_FEW
    if p_value >= alpha or delta == 0:
        return Verdict.NO_CHANGE
    return Verdict.IMPROVED if delta > 0 else Verdict.REGRESSED
