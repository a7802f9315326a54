"""The runs of an experiment arranged for the statistics: scores and rationales by arm, criterion
and case, one result per cell in the spec's order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import counted
from workflows.records import RunResult

OVERALL = "overall"  # the row name of the weighted run score
FAILURE_RATE = "failure rate"  # the row of the agent's failure rate (report/compare.py)
OVERALL_KEY = "(overall)"  # its key in the score table: not a valid criterion name, so no clash

# criterion -> case -> scores of one arm's counted trials ([] = finished, none usable)
ArmScores = dict[str, dict[str, list[float | None]]]


@dataclass
class Table:
    """arm -> criterion -> case -> scores of the counted runs (workflows/outcomes.py: scored
    runs, and the agent's failures at the criteria's floor); arm -> case -> 1.0 per failed and
    0.0 per scored trial; and (arm, case, criterion) -> (score, rationale)s."""

    scores: dict[str, ArmScores]
    failures: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    rationales: dict[tuple[str, str, str], list[tuple[float, str]]] = field(default_factory=dict)

    def lowest(self, arm: str, case: str, criterion: str) -> str:
        """The rationale of the lowest-scoring trial: the failing check or the judge's reason."""
        found = self.rationales.get((arm, case, criterion))
        return min(found, key=lambda item: item[0])[1] if found else ""


def cells_in_order(spec: ExperimentSpec, runs: Iterable[RunResult]) -> list[RunResult]:
    """One result per cell (the last given wins), in the spec's cell order."""
    position = {run_id: i for i, run_id in enumerate(spec.run_ids())}
    latest: dict[str, RunResult] = {}
    for run in runs:
        if run.run_id not in position:
            raise ValueError(
                f"run '{run.run_id}' is not a cell of experiment '{spec.experiment_id}'"
            )
        latest[run.run_id] = run
    return sorted(latest.values(), key=lambda r: position[r.run_id])


def criteria_order(runs: list[RunResult]) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for criterion in run.criteria:
            seen.setdefault(criterion.name, None)
    return list(seen)


def score_table(spec: ExperimentSpec, runs: list[RunResult], criteria: list[str]) -> Table:
    """Scores by arm, criterion and case. A case is present for an arm once any of its cells
    finished, so cases whose trials all errored show up as dropped, not as pending — but only
    under the criteria the case's rubric has (seen in any arm), never under the others."""
    table = Table(
        scores={a.name: {c: {} for c in [OVERALL_KEY, *criteria]} for a in spec.arms},
        failures={a.name: {} for a in spec.arms},
    )
    rubric = case_criteria(runs)
    for run in runs:
        by_criterion = table.scores[run.arm]
        for name in (OVERALL_KEY, *rubric.get(run.case_id, ())):
            by_criterion[name].setdefault(run.case_id, [])
        failures = table.failures[run.arm].setdefault(run.case_id, [])
        result = counted(run)
        if result is None:  # infrastructure: excluded
            continue
        failures.append(1.0 if result.failed else 0.0)
        by_criterion[OVERALL_KEY][run.case_id].append(result.score)
        for criterion in run.criteria:
            by_criterion[criterion.name][run.case_id].append(criterion.score)
            if criterion.score is not None:
                key = (run.arm, run.case_id, criterion.name)
                table.rationales.setdefault(key, []).append((criterion.score, criterion.rationale))
    return table


def case_criteria(runs: list[RunResult]) -> dict[str, list[str]]:
    """case -> the criterion names its rubric has, as seen in any graded run of the case."""
    found: dict[str, dict[str, None]] = {}
    for run in runs:
        names = found.setdefault(run.case_id, {})
        for criterion in run.criteria:
            names.setdefault(criterion.name, None)
    return {case: list(names) for case, names in found.items()}


def judged(table: Table, criterion: str, *arms: str) -> bool:
    return any(
        score is not None
        for arm in arms
        for scores in table.scores[arm][criterion].values()
        for score in scores
    )
