"""A case is dropped from a criterion's pairing only if its rubric has that criterion and one arm
has no usable score for it — never because its rubric simply lacks the criterion."""

from __future__ import annotations

from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import RunStatus
from workflows.report import build_report


def test_cases_without_a_criterion_are_not_listed_as_dropped() -> None:
    spec = make_spec(n_cases=3, trials=1)
    runs = []
    for arm in ("main", "pr"):
        runs.append(scored_run(spec, 0, arm, 0, {"accuracy": 1.0}))  # accuracy only
        runs.append(scored_run(spec, 1, arm, 0, {"privilege": 1.0}))  # privilege only
    runs.append(scored_run(spec, 2, "main", 0, {"accuracy": 1.0, "privilege": 0.0}))
    runs.append(errored_run(spec, 2, "pr", 0, RunStatus.TIMEOUT, "slow"))

    rows = {row.criterion: row for row in build_report(spec, runs).comparisons[0].rows}

    assert rows["accuracy"].dropped_cases == ["case-02"]  # has accuracy, errored in pr
    assert rows["privilege"].dropped_cases == ["case-02"]  # not case-00, which has no privilege
    assert rows["accuracy"].n_cases == 1 and rows["privilege"].n_cases == 1
