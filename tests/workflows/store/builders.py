"""Small builders for the records the store saves."""

from __future__ import annotations

from typing import Any

from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.records import CriterionScore, RunResult, RunStatus, Usage

MAIN_SHA = "a" * 40
PR_SHA = "b" * 40


def make_spec(experiment_id: str = "exp-1", **overrides: Any) -> ExperimentSpec:
    fields: dict[str, Any] = {
        "experiment_id": experiment_id,
        "repo": "acme/legal-agent",
        "dataset": "bar",
        "case_ids": ("contract-1", "contract-2"),
        "arms": (
            ArmSpec(name="main", ref="main", commit=MAIN_SHA, config={"model": "m1"}),
            ArmSpec(name="pr", ref="pull/7/head", commit=PR_SHA, config={"model": "m1"}),
        ),
        "trials": 2,
        "seed": 11,
        "trigger": "comment",
        "labels": {"pr": "7"},
    }
    fields.update(overrides)
    return ExperimentSpec(**fields)


def make_result(
    experiment_id: str = "exp-1",
    case_id: str = "contract-1",
    arm: str = "main",
    trial: int = 0,
    **overrides: Any,
) -> RunResult:
    criteria = (
        CriterionScore(
            name="accuracy", grader="contains_all", weight=2.0, score=1.0, rationale="ok"
        ),
        CriterionScore(name="tone", grader="llm", weight=1.0, score=None, rationale="not judged"),
        CriterionScore(name="citations", grader="regex", weight=0.5, score=0.0, rationale="none"),
    )
    fields: dict[str, Any] = {
        "run_id": f"{experiment_id}/{case_id}/{arm}/{trial}",
        "experiment_id": experiment_id,
        "case_id": case_id,
        "arm": arm,
        "trial": trial,
        "seed": 4_000_000_000,  # cell seeds are unsigned 32-bit: wider than a signed INTEGER
        "status": RunStatus.SCORED,
        "score": 0.8,
        "criteria": criteria,
        "usage": Usage(input_tokens=1200, output_tokens=340, cost_usd=0.0123),
        "wall_s": 12.5,
        "exit_code": 0,
        "provider": "local",
        "image": "img-main-1",
        "commit": MAIN_SHA,
        "limits": {"cpu": 1.0, "memory_mb": 2048, "allow_domains": ["api.openai.com"]},
        "world_version": "w-123",
        "evalbot_version": "0.1.0",
        "outputs_ref": f"runs/{experiment_id}/{case_id}/{arm}/{trial}",
        "provision_s": 0.42,
    }
    fields.update(overrides)
    return RunResult(**fields)
