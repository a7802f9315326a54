"""The noise floor: how much of a paired difference is trial-to-trial noise, and what more
trials would buy (docs/noise-floor.md).

With k_b and k_h judged trials of case i, d_i = mean_h,i − mean_b,i has variance
τ² + σ²_w (1/k_b + 1/k_h), where σ²_w is the within-case (trial-to-trial) variance and τ² the
variance of the true per-case differences (0 in an A/A experiment). σ²_w is pooled from the
trials; τ² is what is left of the variance of the d_i. With T trials per arm, the standard
deviation of d is √(τ² + 2σ²_w / T), and the minimum detectable effect follows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from workflows.stats.flips import PASS_THRESHOLD
from workflows.stats.paired import ALPHA, POWER, TrialScores


@dataclass(frozen=True)
class NoiseFloor:
    n_cases: int
    within_var: float  # σ²_w, pooled over cases and both arms
    between_var: float  # τ², clipped at 0
    trials: float  # harmonic mean of judged trials per case and arm

    def sd_of_differences(self, trials: float) -> float:
        return math.sqrt(self.between_var + 2 * self.within_var / trials)

    def mde(
        self, trials: float, n_cases: int | None = None, alpha: float = ALPHA, power: float = POWER
    ) -> float | None:
        """The minimum detectable |Δ| with `trials` per case and arm and `n_cases` cases."""
        n = n_cases or self.n_cases
        if n < 2:
            return None
        factor = float(sps.t.ppf(1 - alpha / 2, n - 1) + sps.t.ppf(power, n - 1))
        return factor * self.sd_of_differences(trials) / math.sqrt(n)


def noise_floor(base: TrialScores, head: TrialScores) -> NoiseFloor | None:
    """Variance components from the cases judged in both arms; None without two such cases or
    without any case judged at least twice in an arm (σ²_w needs repeated trials)."""
    pairs = [(_judged(base[c]), _judged(head[c])) for c in base if c in head]
    pairs = [(b, h) for b, h in pairs if b and h]
    within = _pooled_within([values for pair in pairs for values in pair])
    if len(pairs) < 2 or within is None:
        return None
    d = np.array([np.mean(h) - np.mean(b) for b, h in pairs])
    inverse = float(np.mean([1 / len(b) + 1 / len(h) for b, h in pairs]))
    between = max(0.0, float(np.var(d, ddof=1)) - within * inverse)
    return NoiseFloor(len(pairs), within, between, trials=2 / inverse)


def _pooled_within(groups: Sequence[Sequence[float]]) -> float | None:
    repeated = [g for g in groups if len(g) > 1]
    dof = sum(len(g) - 1 for g in repeated)
    if dof == 0:
        return None
    return float(sum(np.var(g, ddof=1) * (len(g) - 1) for g in repeated) / dof)


def _judged(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def trial_disagreement(scores: Mapping[str, Sequence[float | None]]) -> float | None:
    """Share of cases with two or more judged trials whose trials did not all give the same
    pass/fail outcome — how often a case 'flips' with nothing changed at all."""
    repeated = [judged for judged in map(_judged, scores.values()) if len(judged) > 1]
    if not repeated:
        return None
    mixed = sum(1 for judged in repeated if len({v >= PASS_THRESHOLD for v in judged}) > 1)
    return mixed / len(repeated)
