"""Re-grade stored outputs with the current rubric and judge — no agent run, no Temporal.

    result = regrade_runs(runs, grade_run, criteria=("tone",), workers=4)
    for run in result.updated: store.save_run(run)

The stored outputs (RunResult.outputs_ref) do not change, so every difference between the old and
the new grades is the ruler — the rubric or the judge — and not the agent. A run whose judge was
unavailable (judge_error) gets its first grades; a run that cannot be graded again keeps its old
grades and is listed with the reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from workflows.blobs import BlobStore, BlobStoreError
from workflows.catalog.catalog_errors import UnknownNameError
from workflows.catalog.models import Case, ExperimentSpec, Rubric, World
from workflows.engine.catalog_cache import CatalogCache
from workflows.records import CriterionScore, RunResult, RunStatus, weighted_score
from workflows.report import build_report
from workflows.scoring import JudgeUnavailable, OutputsLayoutError, RubricError

# (run, criteria to grade or None for all) -> new scores; raises on what cannot be graded
GradeRun = Callable[[RunResult, frozenset[str] | None], list[CriterionScore]]
# (case, outputs folder, world) -> scores: workflows.engine.grading.CaseGrader
GradeCase = Callable[[Case, Path, World], list[CriterionScore]]
REGRADABLE = frozenset({RunStatus.SCORED, RunStatus.JUDGE_ERROR})
GRADING_ERRORS = (
    JudgeUnavailable,
    RubricError,
    OutputsLayoutError,
    UnknownNameError,
    OSError,
    BlobStoreError,
)


class Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class CriterionDiff(Model):
    """Old against new grades of one criterion, over the runs graded again."""

    criterion: str
    compared: int = 0  # runs with a score before and after
    changed: int = 0
    up: int = 0
    down: int = 0
    rationale_changed: int = 0
    mean_before: float | None = None
    mean_after: float | None = None
    newly_scored: int = Field(0, description="No score before (judge error, new criterion).")
    no_longer_scored: int = 0
    rubric_changed: int = Field(0, description="Runs whose rubric hash for it differs.")

    @property
    def moved(self) -> bool:
        return bool(self.changed or self.newly_scored or self.no_longer_scored)


class RegradeFailure(Model):
    run_id: str
    problem: str


class RegradeResult(Model):
    experiment_id: str
    regraded: int = 0  # runs graded again
    updated: list[RunResult] = Field(default_factory=list)  # runs whose grades changed
    recovered: list[str] = Field(default_factory=list)  # judge_error runs that now have scores
    failures: list[RegradeFailure] = Field(default_factory=list)
    skipped: dict[str, int] = Field(default_factory=dict)  # not regradable, by status
    criteria: list[CriterionDiff] = Field(default_factory=list)


def regrade_runs(
    runs: Sequence[RunResult],
    grade: GradeRun,
    *,
    criteria: Iterable[str] | None = None,
    workers: int = 1,
) -> RegradeResult:
    """Grade every scored or judge_error run again; see the module docstring."""
    only = frozenset(criteria) if criteria else None
    eligible = [r for r in runs if r.status in REGRADABLE and r.outputs_ref]
    chosen = {r.run_id for r in eligible}
    skipped = Counter(r.status.value for r in runs if r.run_id not in chosen)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        outcomes = list(pool.map(lambda run: _regrade_one(run, grade, only), eligible))
    pairs = [
        (run, new)
        for run, new in zip(eligible, outcomes, strict=True)
        if isinstance(new, RunResult)
    ]
    return RegradeResult(
        experiment_id=runs[0].experiment_id if runs else "",
        regraded=len(pairs),
        updated=[new for old, new in pairs if _grades_differ(old, new)],
        recovered=[old.run_id for old, new in pairs if old.status is RunStatus.JUDGE_ERROR],
        failures=[
            RegradeFailure(run_id=run.run_id, problem=outcome)
            for run, outcome in zip(eligible, outcomes, strict=True)
            if isinstance(outcome, str)
        ],
        skipped=dict(skipped),
        criteria=criterion_diffs(pairs, only),
    )


def _regrade_one(run: RunResult, grade: GradeRun, only: frozenset[str] | None) -> RunResult | str:
    """The run with new grades, or one sentence on why it could not be graded again."""
    subset = None if run.status is RunStatus.JUDGE_ERROR else only  # no old grades to keep
    try:
        scores = grade(run, subset)
    except GRADING_ERRORS as error:
        return f"{type(error).__name__}: {error}"
    criteria = _merge(run.criteria, scores, subset)
    return run.model_copy(
        update={
            "status": RunStatus.SCORED,
            "error": "",
            "criteria": criteria,
            "score": weighted_score(criteria) if criteria else None,
        }
    )


def _merge(
    old: tuple[CriterionScore, ...], new: list[CriterionScore], only: frozenset[str] | None
) -> tuple[CriterionScore, ...]:
    """All new scores when every criterion was graded; else the old ones with the graded
    criteria replaced in place (and criteria new to the run appended)."""
    if only is None:
        return tuple(new)
    fresh = {c.name: c for c in new}
    kept = tuple(fresh.pop(c.name, c) for c in old if c.name not in only or c.name in fresh)
    return kept + tuple(fresh.values())


def _grades_differ(old: RunResult, new: RunResult) -> bool:
    def key(run: RunResult) -> object:
        return run.status, [(c.name, c.score, c.rationale, c.rubric_hash) for c in run.criteria]

    return key(old) != key(new)


def criterion_diffs(
    pairs: Sequence[tuple[RunResult, RunResult]], only: frozenset[str] | None = None
) -> list[CriterionDiff]:
    """Per criterion (in first-seen order), how the grades moved from old to new."""
    names: dict[str, None] = {}
    for old, new in pairs:
        for c in (*old.criteria, *new.criteria):
            if only is None or c.name in only:
                names.setdefault(c.name, None)
    return [_diff(name, pairs) for name in names]


def _diff(name: str, pairs: Sequence[tuple[RunResult, RunResult]]) -> CriterionDiff:
    before, after, counts = [], [], Counter[str]()
    for old_run, new_run in pairs:
        old, new = _find(old_run, name), _find(new_run, name)
        old_score = old.score if old else None
        new_score = new.score if new else None
        counts["rubric_changed"] += bool(old and new and old.rubric_hash != new.rubric_hash)
        if old_score is None or new_score is None:
            counts["newly_scored"] += old_score is None and new_score is not None
            counts["no_longer_scored"] += old_score is not None and new_score is None
            continue
        before.append(old_score)
        after.append(new_score)
        counts["changed"] += new_score != old_score
        counts["up"] += new_score > old_score
        counts["down"] += new_score < old_score
        counts["rationale_changed"] += bool(old and new and old.rationale != new.rationale)
    return CriterionDiff(
        criterion=name,
        compared=len(before),
        mean_before=sum(before) / len(before) if before else None,
        mean_after=sum(after) / len(after) if after else None,
        **counts,
    )


def _find(run: RunResult, name: str) -> CriterionScore | None:
    return next((c for c in run.criteria if c.name == name), None)


def catalog_grader(
    catalog: CatalogCache, dataset: str, grade_case: GradeCase, blobs: BlobStore
) -> GradeRun:
    """A GradeRun over the current catalog: the case's rubric now (restricted to the asked
    criteria), its world, and the run's stored outputs (a key in `blobs`, read on any host)."""

    def grade(run: RunResult, only: frozenset[str] | None) -> list[CriterionScore]:
        case = catalog.case(dataset, run.case_id)
        if only is not None:
            chosen = tuple(c for c in case.rubric.criteria if c.name in only)
            if not chosen:
                return []
            case = case.model_copy(update={"rubric": Rubric(criteria=chosen)})
        with blobs.local_copy(run.outputs_ref) as outputs:
            return grade_case(case, outputs, catalog.world(case.world))

    return grade


class VerdictChange(Model):
    head: str
    base: str
    criterion: str
    before: str
    after: str


def verdict_changes(
    spec: ExperimentSpec, before: Sequence[RunResult], after: Sequence[RunResult]
) -> list[VerdictChange]:
    """Rows of the diff table whose verdict the regrade changed: the ruler moved the result."""
    old, new = build_report(spec, list(before)), build_report(spec, list(after))
    changes = []
    for old_cmp, new_cmp in zip(old.comparisons, new.comparisons, strict=True):
        was = {r.criterion: r.verdict for r in old_cmp.rows}
        for row in new_cmp.rows:
            if row.criterion in was and was[row.criterion] is not row.verdict:
                changes.append(
                    VerdictChange(
                        head=new_cmp.head,
                        base=new_cmp.base,
                        criterion=row.criterion,
                        before=was[row.criterion].value,
                        after=row.verdict.value,
                    )
                )
    return changes


def apply_updates(runs: Sequence[RunResult], updated: Sequence[RunResult]) -> list[RunResult]:
    """`runs` with the regraded ones swapped in."""
    by_id = {r.run_id: r for r in updated}
    return [by_id.get(r.run_id, r) for r in runs]
