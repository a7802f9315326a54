"""Experiments started and finished are counted once per experiment and per change of status, even
when Temporal retries the activity after its store write landed (its completion was lost).

Broken build caught: counting every attempt (a retried save_experiment or finish_experiment
counted twice)."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import ActivityEnvironment

from tests.workflows.store.builders import make_spec
from workflows.engine.activities import ExperimentActivities
from workflows.engine.telemetry import EngineMetrics
from workflows.store import Store


def sample(metrics: EngineMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_retried_attempts_are_counted_once(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'evalbot.db'}") as store:
        store.migrate()
        metrics = EngineMetrics()
        activities = ExperimentActivities(store, metrics)
        env = ActivityEnvironment()
        spec = make_spec()
        await env.run(activities.save_experiment, spec)
        await env.run(activities.save_experiment, spec)  # the retried attempt
        await env.run(activities.finish_experiment, spec.experiment_id, "completed")
        await env.run(activities.finish_experiment, spec.experiment_id, "completed")

        assert sample(metrics, "evalbot_experiments_started_total") == 1
        assert sample(metrics, "evalbot_experiments_finished_total", status="completed") == 1
        # a rerun (failed, then completed again) is a second finish
        await env.run(activities.finish_experiment, spec.experiment_id, "failed")
        await env.run(activities.finish_experiment, spec.experiment_id, "completed")
        assert sample(metrics, "evalbot_experiments_finished_total", status="completed") == 2
        assert sample(metrics, "evalbot_experiments_finished_total", status="failed") == 1
