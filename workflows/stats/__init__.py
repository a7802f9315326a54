"""Statistics for the diff table — pure functions over per-case trial scores (numpy/scipy).

- paired: Δ head − base paired by case, t interval (the case-clustered SE), p, MDE, verdicts;
- bootstrap: the paired bootstrap interval, a cross-check;
- multiple: Holm across criteria;
- passk: pass@k and pass^k for binary criteria;
- flips: cases that went pass → fail and fail → pass;
- noise: within/between-case variance, the noise floor and MDE for other trial counts.

See docs/statistics.md and docs/noise-floor.md.
"""

from workflows.stats.bootstrap import paired_bootstrap_ci
from workflows.stats.flips import PASS_THRESHOLD, Flips, case_flips
from workflows.stats.multiple import holm, holm_verdicts
from workflows.stats.noise import NoiseFloor, noise_floor, trial_disagreement
from workflows.stats.paired import (
    ALPHA,
    POWER,
    PairedComparison,
    TrialScores,
    Verdict,
    case_means,
    paired_comparison,
    verdict_for,
)
from workflows.stats.passk import PassK, is_binary, mean_pass_k, pass_at_k, pass_hat_k

__all__ = [
    "ALPHA",
    "PASS_THRESHOLD",
    "POWER",
    "Flips",
    "NoiseFloor",
    "PairedComparison",
    "PassK",
    "TrialScores",
    "Verdict",
    "case_flips",
    "case_means",
    "holm",
    "holm_verdicts",
    "is_binary",
    "mean_pass_k",
    "noise_floor",
    "paired_bootstrap_ci",
    "paired_comparison",
    "pass_at_k",
    "pass_hat_k",
    "trial_disagreement",
    "verdict_for",
]
