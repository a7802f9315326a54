"""The paired bootstrap interval: resample cases with replacement, take the mean difference.

It is a cross-check of the t interval, not a replacement: with few cases both are rough, and
when they disagree on whether 0 is inside, the report says so.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 5000
_CHUNK = 500_000  # resampled values drawn at once, to bound memory for large n


def paired_bootstrap_ci(
    differences: np.ndarray, *, alpha: float = 0.05, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the mean of `differences` (one per case) at level 1 − alpha.

    Deterministic for a given seed, so a report renders the same numbers every time."""
    n = len(differences)
    if n == 0 or resamples < 1:
        raise ValueError("need at least one difference and one resample")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    rows = max(1, _CHUNK // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        picks = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = differences[picks].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
