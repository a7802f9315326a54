"""Paired comparison of two arms by case, Holm correction, and pass@k — pure functions.

See docs/statistics.md for the method and the choices made. Inputs are per-arm mappings
`case_id -> trial scores` (None = not judged, ignored); errored trials are simply absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
from scipy import stats as sps

ALPHA = 0.05
POWER = 0.8
_DEGENERATE = 1e-12  # an sd this small (relative to |Δ|, at least 1) counts as zero

TrialScores = Mapping[str, Sequence[float | None]]


class Verdict(StrEnum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    NO_CHANGE = "no detectable change"
    NOT_ENOUGH = "not enough cases"
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


def case_means(scores: TrialScores) -> dict[str, float]:
    """Per case, the mean of its judged trial scores; cases without any are left out."""
    means: dict[str, float] = {}
    for case_id, values in scores.items():
        judged = [v for v in values if v is not None]
        if judged:
            means[case_id] = float(np.mean(judged))
    return means


def paired_comparison(
    base: TrialScores, head: TrialScores, *, alpha: float = ALPHA, power: float = POWER
) -> PairedComparison:
    """Compare head with base on the cases both have a judged score for.

    A case in both mappings without a judged score in one of them (all its trials errored or
    were not judged) is `dropped`; a case in one mapping only is `pending` (not yet run)."""
    base_means, head_means = case_means(base), case_means(head)
    paired = [c for c in head_means if c in base_means]
    dropped = tuple(sorted((set(base) & set(head)) - set(paired)))
    pending = tuple(sorted(set(base) ^ set(head)))
    b = np.array([base_means[c] for c in paired], dtype=float)
    h = np.array([head_means[c] for c in paired], dtype=float)
    return replace(_compare(b, h, alpha, power, dropped), pending=pending)


def _compare(
    b: np.ndarray, h: np.ndarray, alpha: float, power: float, dropped: tuple[str, ...]
) -> PairedComparison:
    n = len(b)
    if n == 0:
        return PairedComparison(0, Verdict.NOT_ENOUGH, dropped=dropped)
    d = h - b
    delta = float(np.mean(d))
    base = PairedComparison(
        n, Verdict.NOT_ENOUGH, float(np.mean(b)), float(np.mean(h)), delta, dropped=dropped
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
        return Verdict.NOT_ENOUGH
    if p_value >= alpha or delta == 0:
        return Verdict.NO_CHANGE
    return Verdict.IMPROVED if delta > 0 else Verdict.REGRESSED


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_verdicts(
    comparisons: Mapping[str, PairedComparison], *, alpha: float = ALPHA
) -> dict[str, tuple[float | None, Verdict]]:
    """Per name, (Holm-adjusted p, verdict) across the comparisons that have a p-value."""
    tested = [name for name, c in comparisons.items() if c.p_value is not None]
    adjusted = dict(zip(tested, holm([comparisons[n].p_value or 0.0 for n in tested]), strict=True))
    result: dict[str, tuple[float | None, Verdict]] = {}
    for name, comparison in comparisons.items():
        p_adj = adjusted.get(name)
        result[name] = (p_adj, verdict_for(comparison.delta, p_adj, alpha))
    return result


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k trials drawn without replacement from n passes), c passes in n."""
    _check_counts(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: P(all k trials drawn without replacement from n pass), c passes in n."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def is_binary(scores: TrialScores) -> bool:
    """Every judged score is 0 or 1 (and there is at least one)."""
    judged = [v for values in scores.values() for v in values if v is not None]
    return bool(judged) and all(v in (0.0, 1.0) for v in judged)


@dataclass(frozen=True)
class PassK:
    k: int
    pass_at_k: float
    pass_hat_k: float
    n_cases: int  # cases with at least k judged trials


def mean_pass_k(scores: TrialScores, k: int) -> PassK | None:
    """pass@k and pass^k averaged over the cases with at least k judged 0/1 trials."""
    if not is_binary(scores):
        raise ValueError("pass@k needs binary (0 or 1) scores")
    counts = [(len(j), int(sum(j))) for j in _judged(scores) if len(j) >= k]
    if not counts:
        return None
    at = float(np.mean([pass_at_k(n, c, k) for n, c in counts]))
    hat = float(np.mean([pass_hat_k(n, c, k) for n, c in counts]))
    return PassK(k, at, hat, len(counts))


def _judged(scores: TrialScores) -> list[list[float]]:
    return [[v for v in values if v is not None] for values in scores.values()]
