"""pass@k and pass^k for binary criteria (Chen et al., 2021): unbiased, per case, then averaged."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workflows.stats.paired import TrialScores


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
