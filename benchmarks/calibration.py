"""Calibration of the paired comparison: simulated A/A and known-effect experiments, per shape.

Every simulated experiment goes through `workflows.stats.paired_comparison`, the function the
report uses (without the bootstrap, which does not enter the verdict). Per shape of data, it
runs A/A experiments (both arms draw from the same per-case distribution: any improved/regressed
verdict is a false positive) and experiments with a known effect (the head arm's per-case pass
probability or mean score shifted on the logit scale, so cases gain by different amounts; the
true Δ is the population mean difference, computed exactly by integration over the case
difficulty distribution). Cases differ in difficulty: per-case pass probabilities (or mean
scores) are drawn from a Beta, afresh for every experiment. Infrastructure failures remove head
cells at random; `workflows.outcomes.InfrastructureLoss` then decides whether the comparison is
"incomplete", which is counted apart (it is not a false positive).

Printed per shape: the methods used, the false-positive rate (A/A experiments whose verdict is
improved/regressed), how often the test itself had p < 0.05 in A/A before the case-count and
completeness rules, the coverage of the reported 95% intervals (A/A and effect runs, true Δ 0
and the effect's Δ), the power (effect runs detecting the right sign), and how many experiments
were "too few cases" or "incomplete". Goal: false positives ≤ 5% and coverage ≥ 94% in every
shape. Seeded and deterministic. `--write` replaces the "## Calibration" section of
benchmarks/RESULTS.md (between its generated markers), dated, with the machine. Usage:

    .venv/bin/python benchmarks/calibration.py [--runs N] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_figures import host_and_load
from results_file import RESULTS, write_section
from scipy import integrate
from scipy import stats as sps
from scipy.special import expit, logit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflows.outcomes import InfrastructureLoss  # noqa: E402
from workflows.stats import ALPHA, PairedComparison, Verdict, paired_comparison  # noqa: E402

SECTION = "calibration"  # its markers in RESULTS.md (results_file.py)
HEADING = "## Calibration"
RUNS = 10_000  # A/A experiments per shape, and as many with an effect
SEED = 20_240_601
FP_GOAL = 0.05
COVERAGE_GOAL = 0.94

Scores = dict[str, list[float | None]]
Draw = Callable[[np.random.Generator, bool], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Shape:
    """A kind of experiment: `draw(rng, effect)` gives base and head scores, cases × trials."""

    name: str
    cases: int
    trials: int
    draw: Draw
    true_delta: float  # population Δ of the effect runs (A/A: 0)
    head_loss: float = 0.0  # share of head cells lost to infrastructure, at random


@dataclass
class Tally:
    runs: int = 0
    false_positives: int = 0
    aa_rejections: int = 0  # A/A with p < alpha, before the too-few and incomplete rules
    covered: int = 0
    intervals: int = 0
    detected: int = 0
    too_few: int = 0
    incomplete: int = 0
    methods: Counter[str] = field(default_factory=Counter)


def shifted(p: np.ndarray, theta: float) -> np.ndarray:
    """p moved by theta on the logit scale (0 and 1 stay put)."""
    with np.errstate(divide="ignore"):
        return np.asarray(expit(logit(p) + theta))


def beta_delta(a: float, b: float, theta: float) -> float:
    """E[expit(logit p + θ) − p] for p ~ Beta(a, b), by integration."""
    pdf = sps.beta(a, b).pdf
    value, _ = integrate.quad(lambda p: (shifted(np.array(p), theta) - p) * pdf(p), 0, 1)
    return float(value)


def binary(cases: int, trials: int, a: float, b: float, theta: float) -> Draw:
    """Pass/fail trials; per-case pass probability ~ Beta(a, b), shifted by θ in the head."""

    def draw(rng: np.random.Generator, effect: bool) -> tuple[np.ndarray, np.ndarray]:
        p = rng.beta(a, b, cases)
        q = shifted(p, theta) if effect else p
        base = rng.random((cases, trials)) < p[:, None]
        head = rng.random((cases, trials)) < q[:, None]
        return base.astype(float), head.astype(float)

    return draw


def continuous(
    cases: int, trials: int, a: float, b: float, theta: float, *, spread: float, outliers: float
) -> Draw:
    """Judge scores: per-case mean μ ~ Beta(a, b) (shifted by θ in the head); each trial scores
    Beta(μ·spread, (1 − μ)·spread), or with probability `outliers` a 0/1 outlier (1 with
    probability μ), so every trial's expected score is μ; clipped to [0, 1]."""

    def scores(rng: np.random.Generator, mu: np.ndarray) -> np.ndarray:
        m = np.repeat(mu[:, None], trials, axis=1)
        values = rng.beta(m * spread, (1 - m) * spread)
        outlier = rng.random(m.shape) < outliers
        values[outlier] = (rng.random(m.shape) < m)[outlier]
        return np.asarray(np.clip(values, 0.0, 1.0))

    def draw(rng: np.random.Generator, effect: bool) -> tuple[np.ndarray, np.ndarray]:
        mu = rng.beta(a, b, cases)
        return scores(rng, mu), scores(rng, shifted(mu, theta) if effect else mu)

    return draw


def always_passes(cases: int, a: float, b: float) -> Draw:
    """Base passes every case (zero variance); the effect: head passes with p ~ Beta(a, b)."""

    def draw(rng: np.random.Generator, effect: bool) -> tuple[np.ndarray, np.ndarray]:
        base = np.ones((cases, 1))
        if not effect:
            return base, np.ones((cases, 1))
        p = rng.beta(a, b, cases)
        return base, (rng.random((cases, 1)) < p[:, None]).astype(float)

    return draw


LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
LEVEL_P = np.array([0.15, 0.15, 0.2, 0.2, 0.3])
UP, DOWN = 0.3, 0.1  # with the effect, a case moves one level up (down) with this probability


def deterministic(cases: int, trials: int) -> Draw:
    """A deterministic agent and grader: partial credit in quarters, every trial identical.
    With the effect, each case moves one level up or down at random."""

    def draw(rng: np.random.Generator, effect: bool) -> tuple[np.ndarray, np.ndarray]:
        level = rng.choice(len(LEVELS), size=cases, p=LEVEL_P)
        moved = level.copy()
        if effect:
            u = rng.random(cases)
            moved = np.clip(level + (u < UP) - ((u >= UP) & (u < UP + DOWN)), 0, len(LEVELS) - 1)
        base = np.repeat(LEVELS[level][:, None], trials, axis=1)
        return base, np.repeat(LEVELS[moved][:, None], trials, axis=1)

    return draw


def deterministic_delta() -> float:
    up = (LEVELS < 1.0) * UP * 0.25
    down = (LEVELS > 0.0) * DOWN * 0.25
    return float(np.sum(LEVEL_P * (up - down)))


def shapes() -> list[Shape]:
    """Difficulty: U-shaped Beta(0.8, 0.8) for binary criteria (many cases nearly always pass
    or fail), Beta(2, 2) for judge scores."""
    u, bell = (0.8, 0.8), (2.0, 2.0)
    result = [
        Shape(f"binary, 1 trial, {n} cases", n, 1, binary(n, 1, *u, 1.5), beta_delta(*u, 1.5))
        for n in (5, 10, 20)
    ]
    result += [
        Shape("base always passes, 1 trial", 20, 1, always_passes(20, 6, 2), 6 / 8 - 1.0),
        Shape("deterministic, partial credit", 20, 3, deterministic(20, 3), deterministic_delta()),
        Shape(
            "heavy-tailed judge, 1 trial",
            20,
            1,
            continuous(20, 1, *bell, 0.6, spread=2.0, outliers=0.15),
            beta_delta(*bell, 0.6),
        ),
    ]
    result += [
        Shape(
            f"judge scores, {t} trials",
            20,
            t,
            continuous(20, t, *bell, 0.4, spread=6.0, outliers=0.05),
            beta_delta(*bell, 0.4),
        )
        for t in (3, 5)
    ]
    result.append(Shape("binary, 5 trials", 20, 5, binary(20, 5, *u, 0.8), beta_delta(*u, 0.8)))
    result += [
        Shape(
            f"binary, 3 trials, {loss:.0%} head cells lost",
            20,
            3,
            binary(20, 3, *u, 0.8),
            beta_delta(*u, 0.8),
            head_loss=loss,
        )
        for loss in (0.05, 0.20)
    ]
    return result


def as_scores(values: np.ndarray, lost: np.ndarray | None = None) -> Scores:
    """Cases × trials as the report's input, without the cells marked lost."""
    rows: Scores = {}
    for i, row in enumerate(values.tolist()):
        keep = (
            row if lost is None else [v for v, gone in zip(row, lost[i], strict=True) if not gone]
        )
        rows[f"case{i}"] = keep
    return rows


def experiment(
    shape: Shape, rng: np.random.Generator, effect: bool
) -> tuple[PairedComparison, Verdict]:
    """One simulated experiment: the comparison, and its verdict after the completeness rule."""
    base, head = shape.draw(rng, effect)
    lost = rng.random(head.shape) < shape.head_loss if shape.head_loss else None
    result = paired_comparison(as_scores(base), as_scores(head, lost))
    cells = shape.cases * shape.trials
    loss = InfrastructureLoss(0, cells, int(lost.sum()) if lost is not None else 0, cells)
    return result, Verdict.INCOMPLETE if loss.incomplete else result.verdict


def simulate(shape: Shape, runs: int, seed: int) -> tuple[Tally, Tally]:
    rng = np.random.default_rng(seed)
    aa, effect = Tally(), Tally()
    for is_effect, tally in ((False, aa), (True, effect)):
        truth = shape.true_delta if is_effect else 0.0
        for _ in range(runs):
            result, verdict = experiment(shape, rng, is_effect)
            tally.runs += 1
            tally.methods[result.method] += 1
            tally.too_few += verdict is Verdict.TOO_FEW
            tally.incomplete += verdict is Verdict.INCOMPLETE
            if result.ci_low is not None and result.ci_high is not None:
                tally.intervals += 1
                tally.covered += result.ci_low <= truth <= result.ci_high
            if is_effect:
                right = Verdict.IMPROVED if truth > 0 else Verdict.REGRESSED
                tally.detected += verdict is right
            else:
                tally.false_positives += verdict.is_change
                tally.aa_rejections += result.p_value is not None and result.p_value < ALPHA
    return aa, effect


def rate_interval(hits: int, total: int) -> tuple[float, float]:
    """Clopper–Pearson 95% interval of a simulated rate: the Monte Carlo error."""
    interval = sps.binomtest(hits, total).proportion_ci(0.95, method="exact")
    return float(interval.low), float(interval.high)


@dataclass(frozen=True)
class Row:
    shape: Shape
    aa: Tally
    effect: Tally

    @property
    def false_positive_rate(self) -> float:
        return self.aa.false_positives / self.aa.runs

    @property
    def false_positive_interval(self) -> tuple[float, float]:
        return rate_interval(self.aa.false_positives, self.aa.runs)

    @property
    def coverage(self) -> float:
        intervals = self.aa.intervals + self.effect.intervals
        return (self.aa.covered + self.effect.covered) / intervals if intervals else float("nan")

    @property
    def coverage_interval(self) -> tuple[float, float]:
        return rate_interval(
            self.aa.covered + self.effect.covered, self.aa.intervals + self.effect.intervals
        )

    @property
    def goal(self) -> str:
        """ "yes" when both estimates meet the goal; "within sampling error" when one misses it
        by less than the simulation can resolve (its 95% interval reaches the goal); else NO."""
        if self.false_positive_rate <= FP_GOAL and self.coverage >= COVERAGE_GOAL:
            return "yes"
        if (
            self.false_positive_interval[0] <= FP_GOAL
            and self.coverage_interval[1] >= COVERAGE_GOAL
        ):
            return "within sampling error"
        return "NO"

    def cells(self) -> list[str]:
        methods = self.aa.methods + self.effect.methods
        total = sum(methods.values())
        used = ", ".join(f"{m} {c / total:.0%}" for m, c in methods.most_common())
        both = self.aa.runs + self.effect.runs
        fp_low, fp_high = self.false_positive_interval
        cov_low, cov_high = self.coverage_interval
        return [
            self.shape.name,
            f"{self.shape.cases} × {self.shape.trials}",
            f"{self.shape.true_delta:+.3f}",
            used,
            f"{self.false_positive_rate:.2%} ({fp_low:.2%}–{fp_high:.2%})",
            f"{self.aa.aa_rejections / self.aa.runs:.2%}",
            f"{self.coverage:.2%} ({cov_low:.2%}–{cov_high:.2%})",
            f"{self.effect.detected / self.effect.runs:.1%}",
            f"{self.aa.too_few + self.effect.too_few}/{both}",
            f"{self.aa.incomplete + self.effect.incomplete}/{both}",
            self.goal,
        ]


HEADER = [
    "shape",
    "cases × trials",
    "true Δ (effect)",
    "method used",
    "false positives (A/A)",
    "A/A p < 0.05 before the rules",
    "coverage",
    "power",
    "too few cases",
    "incomplete",
    "goal met",
]


def table(rows: list[Row]) -> list[str]:
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|" + "---:|" * 1 + "---|" + "---:|" * 7]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return lines


def summary(rows: list[Row]) -> str:
    met = [row for row in rows if row.goal == "yes"]
    close = [row.shape.name for row in rows if row.goal == "within sampling error"]
    missed = [row.shape.name for row in rows if row.goal == "NO"]
    worst_fp = max(rows, key=lambda r: r.false_positive_rate)
    worst_cov = min(rows, key=lambda r: r.coverage)
    text = (
        f"{len(met)} of {len(rows)} shapes meet the goal (false positives ≤ {FP_GOAL:.0%}, "
        f"coverage ≥ {COVERAGE_GOAL:.0%}) on the estimates, {len(close)} within sampling "
        f"error, {len(missed)} miss it. Highest false-positive rate: "
        f"{worst_fp.false_positive_rate:.2%} ({worst_fp.shape.name}); lowest coverage: "
        f"{worst_cov.coverage:.2%} ({worst_cov.shape.name})."
    )
    if close:
        text += " Within sampling error: " + "; ".join(close) + "."
    if missed:
        text += " Missed: " + "; ".join(missed) + "."
    return text


def section(rows: list[Row], runs: int, seconds: float) -> str:
    machine = host_and_load()
    return "\n".join(
        [
            HEADING,
            "",
            "`.venv/bin/python benchmarks/calibration.py --write` simulates, per shape of data, "
            f"{runs:,} A/A experiments and {runs:,} with a known effect, each through "
            "`workflows.stats.paired_comparison` (the report's function; see "
            'docs/statistics.md, "Calibration"). False positives: A/A experiments whose '
            "verdict is improved/regressed (too few cases and incomplete are neither). The next "
            "column is the test alone, before the minimum-case and completeness rules. Coverage: "
            "reported 95% intervals containing the true Δ (0 in A/A), over both kinds of "
            "experiment. Power: effect experiments with the right verdict. In brackets, the "
            "95% Clopper–Pearson interval of the simulated rate (its sampling error): a test "
            "whose size is exactly 5% shows an estimate above 5% in about half the shapes.",
            "",
            f"Run {datetime.date.today().isoformat()} on {machine}, in {seconds:.0f} s, "
            f"seed {SEED}.",
            "",
            *table(rows),
            "",
            summary(rows),
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=RUNS, help="A/A (and effect) runs per shape")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    options = parser.parse_args()
    started = time.perf_counter()
    rows = [
        Row(shape, *simulate(shape, options.runs, SEED + index))
        for index, shape in enumerate(shapes())
    ]
    text = section(rows, options.runs, time.perf_counter() - started)
    print(text)
    if options.write:
        write_section(SECTION, text)
        print(f"(written to {RESULTS.relative_to(ROOT)})")
    return 0 if all(row.goal != "NO" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
