"""workflows.score_history: main evaluations only, oldest first, case means with t intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.experiments import make_spec, scored_run
from workflows.score_history import is_main_evaluation, mean_interval, score_history
from workflows.store import Store


def _store(tmp_path: Path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'evalbot.db'}")
    store.migrate()
    return store


def test_mean_interval_is_over_case_means() -> None:
    result = mean_interval({"a": [1.0, 0.0], "b": [1.0], "c": [0.0]})
    assert result.mean == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert result.n_cases == 3
    assert result.ci_low is not None and result.ci_high is not None
    assert result.ci_low < result.mean < result.ci_high
    # two of 10 cases pass: the t interval reaches below 0 unless clipped to the score range
    rare = mean_interval({f"c{i}": [1.0 if i < 2 else 0.0] for i in range(10)})
    assert rare.mean == pytest.approx(0.2) and rare.ci_low == 0.0
    assert rare.ci_high is not None and 0.2 < rare.ci_high < 1.0
    single = mean_interval({"a": [0.25]})
    assert single.mean == 0.25 and single.ci_low is None
    assert mean_interval({}).mean is None


def test_history_keeps_completed_main_evaluations_oldest_first(tmp_path: Path) -> None:
    store = _store(tmp_path)
    base = make_spec(n_cases=4, trials=1)
    specs = {
        "main-1": base.model_copy(update={"experiment_id": "main-1", "trigger": "main"}),
        "cli": base.model_copy(update={"experiment_id": "cli"}),
        "labelled": base.model_copy(
            update={"experiment_id": "labelled", "labels": {"eval": "main"}}
        ),
        "running": base.model_copy(update={"experiment_id": "running", "trigger": "main"}),
    }
    for name, spec in specs.items():
        store.save_experiment(spec)
        for i in range(4):
            for arm in ("main", "pr"):
                value = 1.0 if (arm == "pr" and i < 3) or name == "labelled" else 0.0
                store.save_run(scored_run(spec, i, arm, 0, {"accuracy": value}, cost=0.5))
        if name != "running":
            store.set_experiment_status(name, "completed")
    assert is_main_evaluation(store.get_experiment("labelled"))  # type: ignore[arg-type]
    points = score_history(store, "bar")
    assert [p.experiment_id for p in points] == ["main-1", "labelled"]
    first = points[0]
    assert first.commit == base.arms[-1].commit  # the last arm: main's head
    assert first.overall.mean == pytest.approx(0.75)
    assert first.criteria["accuracy"].mean == pytest.approx(0.75)
    assert first.overall.n_cases == 4
    assert first.cost_usd == pytest.approx(4.0)  # 8 runs at $0.50, both arms
    assert points[1].overall.mean == pytest.approx(1.0)
    assert score_history(store, "other") == []
