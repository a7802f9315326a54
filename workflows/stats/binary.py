"""Paired binary outcomes: the exact McNemar test and Newcombe's interval for the difference.

Used when every per-case mean in both arms is exactly 0 or 1 (a binary criterion with one trial,
or trials that agree). The cases then form a paired 2×2 table, in Newcombe's (1998) notation
with the head arm first:

                 base passes   base fails
    head passes       a            b
    head fails        c            d

Δ = head − base = (b − c) / n. The test is McNemar's (1947) in its exact form: under "no
change" each discordant case is equally likely to be b or c, so b ~ Binomial(b + c, 1/2),
two-sided (scipy.stats.binomtest). The interval is Newcombe's method 10: Wilson score limits
for each arm's pass rate, combined with the correlation φ of the table, continuity-corrected.
See docs/statistics.md, "Small samples".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class PairedTable:
    """Counts of paired cases; the head arm is the first proportion, the base arm the second."""

    both: int  # a: passes in both arms
    head_only: int  # b: fails in base, passes in head
    base_only: int  # c: passes in base, fails in head
    neither: int  # d: fails in both

    @property
    def n(self) -> int:
        return self.both + self.head_only + self.base_only + self.neither

    @property
    def delta(self) -> float:
        """Head pass rate − base pass rate."""
        return (self.head_only - self.base_only) / self.n


def is_binary_means(values: np.ndarray) -> bool:
    """Every value is exactly 0 or 1."""
    return bool(np.all((values == 0.0) | (values == 1.0)))


def paired_table(base: np.ndarray, head: np.ndarray) -> PairedTable:
    """The 2×2 table of per-case outcomes (each 0 or 1), paired by position."""
    if not (is_binary_means(base) and is_binary_means(head)) or len(base) != len(head):
        raise ValueError("need two equally long arrays of 0s and 1s")
    b, h = base.astype(bool), head.astype(bool)
    return PairedTable(
        both=int(np.sum(b & h)),
        head_only=int(np.sum(~b & h)),
        base_only=int(np.sum(b & ~h)),
        neither=int(np.sum(~b & ~h)),
    )


def mcnemar_exact_p(head_only: int, base_only: int) -> float:
    """Two-sided exact McNemar p-value: the discordant cases against Binomial(b + c, 1/2)."""
    discordant = head_only + base_only
    if discordant == 0:
        return 1.0
    return float(sps.binomtest(head_only, discordant, 0.5).pvalue)


def wilson_interval(successes: int, n: int, alpha: float) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion, without continuity correction."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes}/{n}")
    z = float(sps.norm.ppf(1 - alpha / 2))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_phi(table: PairedTable) -> float:
    """The table's correlation φ with Newcombe's continuity correction: when ad > bc the
    numerator is max(ad − bc − n/2, 0); φ = 0 when a margin is empty."""
    a, b, c, d = table.both, table.head_only, table.base_only, table.neither
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    numerator = float(a * d - b * c)
    if numerator > 0:
        numerator = max(numerator - table.n / 2, 0.0)
    return numerator / math.sqrt(margins)


def newcombe_interval(table: PairedTable, alpha: float) -> tuple[float, float]:
    """Newcombe (1998) method 10: the 1 − alpha interval for head − base from the two Wilson
    intervals and the continuity-corrected φ, clipped to [−1, 1]."""
    n = table.n
    p1 = (table.both + table.head_only) / n  # head
    p2 = (table.both + table.base_only) / n  # base
    l1, u1 = wilson_interval(table.both + table.head_only, n, alpha)
    l2, u2 = wilson_interval(table.both + table.base_only, n, alpha)
    phi = newcombe_phi(table)
    theta = p1 - p2
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return max(-1.0, theta - below), min(1.0, theta + above)
