"""The outcome policy, in one place: how each run status enters the numbers (docs/statistics.md,
"Outcome policy").

- **counted** — `scored`, and every failure the agent caused (`agent_error`, `timeout`,
  `out_of_memory`, `resource_limit`, `output_error`, and a PR commit whose own build fails,
  recorded as `agent_error`). A failed run scores each criterion's floor (0 unless the rubric
  says otherwise) and enters every mean, difference, interval, verdict and pass@k.
- **excluded** — infrastructure: `sandbox_error`, `judge_error` (with provider rate limits and
  quota, recorded as `sandbox_error`) and `cancelled`. Retried automatically, then left out of
  every number and named; too many of them make a comparison "incomplete".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from workflows.records import RunResult, RunStatus, weighted_score

BUILD_FAILED = "build failed"  # how a failed build of the arm's commit begins its cells' error
FAILURE_SCORE = 0.0  # what a failed run scores on a criterion whose rubric sets no floor
INCOMPLETE_SHARE = 0.10  # an arm losing more than this share of its cells is incomplete
UNBALANCED_SHARE = 0.05  # ... as is a comparison whose arms' lost shares differ by more


class Outcome(StrEnum):
    SCORED = "scored"
    FAILED = "failed"  # the agent's failure: counted, at the criteria's floor
    EXCLUDED = "excluded"  # infrastructure: retried, then left out and named


AGENT_FAILURES = frozenset(
    {
        RunStatus.AGENT_ERROR,
        RunStatus.TIMEOUT,
        RunStatus.OUT_OF_MEMORY,
        RunStatus.RESOURCE_LIMIT,
        RunStatus.OUTPUT_ERROR,
    }
)
INFRASTRUCTURE = frozenset({RunStatus.SANDBOX_ERROR, RunStatus.JUDGE_ERROR, RunStatus.CANCELLED})


def outcome_of(status: RunStatus) -> Outcome:
    if status is RunStatus.SCORED:
        return Outcome.SCORED
    if status in AGENT_FAILURES:
        return Outcome.FAILED
    return Outcome.EXCLUDED


def build_failed(commit: str, detail: str) -> str:
    """The recorded error of a cell whose arm's commit did not build: the arm's own failure."""
    detail = detail.removeprefix(f"building {commit[:12]} failed: ")  # the provider's words
    return f"{BUILD_FAILED} at {commit[:12]}: {detail}"


def is_build_failure(run: RunResult) -> bool:
    return run.status is RunStatus.AGENT_ERROR and run.error.startswith(BUILD_FAILED)


@dataclass(frozen=True)
class CountedRun:
    """What a counted run contributes: its overall score and a score per criterion (None = not
    judged); `failed` marks an agent failure scored at the floor."""

    score: float | None
    criteria: dict[str, float | None]
    failed: bool


def counted(run: RunResult) -> CountedRun | None:
    """The run as the numbers see it; None for a run excluded as infrastructure.

    A failed run's criteria were recorded at their floors when it ended (workflows.scoring
    `failed_criteria`); one recorded without them (before that rule) scores FAILURE_SCORE overall
    and is absent from the criteria it never listed."""
    outcome = outcome_of(run.status)
    if outcome is Outcome.EXCLUDED:
        return None
    criteria = {c.name: c.score for c in run.criteria}
    score = run.score if run.score is not None else weighted_score(run.criteria)
    if outcome is Outcome.FAILED:
        return CountedRun(FAILURE_SCORE if score is None else score, criteria, failed=True)
    return CountedRun(score, criteria, failed=False)


@dataclass(frozen=True)
class InfrastructureLoss:
    """Cells of two arms lost to infrastructure, and whether that makes the comparison
    incomplete: either arm lost more than INCOMPLETE_SHARE of its finished cells, or the arms'
    shares differ by more than UNBALANCED_SHARE (losses on one side can bias the difference)."""

    base_lost: int
    base_cells: int
    head_lost: int
    head_cells: int

    @property
    def lost(self) -> int:
        return self.base_lost + self.head_lost

    @property
    def incomplete(self) -> bool:
        base, head = (
            _share(self.base_lost, self.base_cells),
            _share(self.head_lost, self.head_cells),
        )
        return max(base, head) > INCOMPLETE_SHARE or abs(base - head) > UNBALANCED_SHARE


def _share(lost: int, cells: int) -> float:
    return lost / cells if cells else 0.0
