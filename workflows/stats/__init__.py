"""Statistics for the diff table — pure functions over per-case trial scores (numpy/scipy).

- paired: Δ head − base paired by case, interval, p, MDE, verdicts, the minimum case count;
  the paired t (the case-clustered SE), or the bound when every case moved alike;
- binary: the exact McNemar test and Newcombe's interval, for per-case outcomes all 0 or 1;
- bootstrap: the paired bootstrap interval, a cross-check;
- multiple: Holm across criteria;
- passk: pass@k and pass^k for binary criteria;
- flips: cases that went pass → fail and fail → pass;
- noise: within/between-case variance, the noise floor and MDE for other trial counts.

See docs/statistics.md ("Small samples" for the choice of method) and docs/noise-floor.md.
"""

from workflows.stats.binary import (
    PairedTable,
    mcnemar_exact_p,
    newcombe_interval,
    paired_table,
    wilson_interval,
)
from workflows.stats.bootstrap import paired_bootstrap_ci
from workflows.stats.flips import PASS_THRESHOLD, Flips, case_flips
from workflows.stats.multiple import holm, holm_verdicts
from workflows.stats.noise import NoiseFloor, noise_floor, trial_disagreement
from workflows.stats.paired import (
    ALPHA,
    BOUND,
    EXACT_BINARY,
    MIN_CASES,
    NO_TEST,
    POWER,
    T_TEST,
    PairedComparison,
    TrialScores,
    Verdict,
    case_means,
    cases_needed,
    paired_comparison,
    verdict_for,
)
from workflows.stats.passk import PassK, is_binary, mean_pass_k, pass_at_k, pass_hat_k

__all__ = [
    "ALPHA",
    "BOUND",
    "EXACT_BINARY",
    "MIN_CASES",
    "NO_TEST",
    "PASS_THRESHOLD",
    "POWER",
    "T_TEST",
    "Flips",
    "NoiseFloor",
    "PairedComparison",
    "PairedTable",
    "PassK",
    "TrialScores",
    "Verdict",
    "case_flips",
    "case_means",
    "cases_needed",
    "holm",
    "holm_verdicts",
    "is_binary",
    "mcnemar_exact_p",
    "mean_pass_k",
    "newcombe_interval",
    "noise_floor",
    "paired_bootstrap_ci",
    "paired_comparison",
    "paired_table",
    "pass_at_k",
    "pass_hat_k",
    "trial_disagreement",
    "verdict_for",
    "wilson_interval",
]
