"""What the report says beside the numbers: errors by class with the command that retries them,
whether the rubric changed under the scores, and the noise floor of a comparison."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import Outcome, outcome_of
from workflows.records import RunResult, RunStatus
from workflows.report.report_models import ErrorClass, NoiseSummary, RubricCheck, TrialsMde
from workflows.report.table import OVERALL_KEY, Table
from workflows.stats import noise_floor

PROJECTED_TRIALS = (1, 3, 5, 10)


def error_classes(experiment_id: str, runs: list[RunResult]) -> list[ErrorClass]:
    """Errored runs by status, most frequent first (workflows/outcomes.py). Infrastructure is
    retried: judge errors regraded (the outputs are stored), the rest rerun. The agent's failures
    are results; rerunning them is an explicit choice, so only the CLI offers it."""
    counts = Counter(r.status for r in runs if r.status.is_error)
    return [
        ErrorClass(
            status=status,
            count=count,
            infra=outcome_of(status) is Outcome.EXCLUDED,
            command=_command(experiment_id, status),
            comment=_comment(status),
        )
        for status, count in counts.most_common()
    ]


def _command(experiment_id: str, status: RunStatus) -> str:
    if status is RunStatus.JUDGE_ERROR:
        return f"evalbot regrade {experiment_id}"
    if outcome_of(status) is Outcome.FAILED:
        return f"evalbot rerun {experiment_id} --failed --include-agent-failures"
    return f"evalbot rerun {experiment_id} --failed"


def _comment(status: RunStatus) -> str | None:
    if status is RunStatus.JUDGE_ERROR or outcome_of(status) is Outcome.FAILED:
        return None
    return "/eval rerun --failed"


def rubric_check(
    runs: list[RunResult], current: Mapping[tuple[str, str], str] | None = None
) -> RubricCheck:
    """Criteria scored under more than one rubric version, and (given the current catalog's
    hashes, `(case, criterion) -> hash`) criteria whose rubric changed since they were scored."""
    seen: dict[tuple[str, str], set[str]] = {}
    unhashed = 0
    for run in runs:
        if run.status is not RunStatus.SCORED:
            continue
        unhashed += any(not c.rubric_hash for c in run.criteria)
        for c in run.criteria:
            if c.rubric_hash:
                seen.setdefault((run.case_id, c.name), set()).add(c.rubric_hash)
    mixed = {name for (_, name), hashes in seen.items() if len(hashes) > 1}
    stale = set()
    if current is not None:
        stale = {
            name
            for (case, name), hashes in seen.items()
            if current.get((case, name)) is not None and hashes != {current[(case, name)]}
        }
    return RubricCheck(
        mixed=sorted(mixed),
        stale=sorted(stale),
        unhashed_runs=unhashed,
        checked_against_catalog=current is not None,
    )


def is_aa(spec: ExperimentSpec, base: str, head: str) -> bool:
    """Both arms run the same commit with the same config: every difference is noise."""
    a, b = spec.arm(base), spec.arm(head)
    return a.commit == b.commit and a.config == b.config


def noise_summary(table: Table, base: str, head: str, trials: int) -> NoiseSummary | None:
    floor = noise_floor(table.scores[base][OVERALL_KEY], table.scores[head][OVERALL_KEY])
    if floor is None:
        return None
    projected = []
    for count in sorted({*PROJECTED_TRIALS, trials}):
        mde = floor.mde(count)
        if mde is not None:
            projected.append(TrialsMde(trials=count, mde=mde))
    return NoiseSummary(
        n_cases=floor.n_cases,
        trials=floor.trials,
        within_var=floor.within_var,
        between_var=floor.between_var,
        mde_by_trials=projected,
    )
