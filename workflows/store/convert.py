"""Mapping between the records (RunResult, ExperimentSpec) and table rows.

Only columns the tables declare are produced: nothing free-form (and so no secret) reaches the DB.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from workflows.catalog.models import ExperimentSpec
from workflows.records import (
    CriterionScore,
    JudgeRecord,
    RunResult,
    RunStatus,
    SandboxUsage,
    Usage,
)
from workflows.store.store_records import ExperimentRecord, ExperimentStatus


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes (stored as UTC); PostgreSQL returns aware ones."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def experiment_values(spec: ExperimentSpec, status: ExperimentStatus) -> dict[str, Any]:
    """The experiments row for `spec`, without the timestamps."""
    return {
        "id": spec.experiment_id,
        "repo": spec.repo,
        "dataset": spec.dataset,
        "spec": spec.model_dump(mode="json"),
        "status": status.value,
        "trigger": spec.trigger,
        "labels": dict(spec.labels),
    }


def arm_values(spec: ExperimentSpec) -> list[dict[str, Any]]:
    return [
        {
            "experiment_id": spec.experiment_id,
            "name": arm.name,
            "ref": arm.ref,
            "commit": arm.commit,
            "config": dict(arm.config),
        }
        for arm in spec.arms
    ]


def experiment_record(row: Any) -> ExperimentRecord:
    """An ExperimentRecord from an experiments row (any object with the column attributes)."""
    return ExperimentRecord(
        spec=ExperimentSpec.model_validate(row.spec),
        status=ExperimentStatus(row.status),
        created_at=as_utc(row.created_at),
        finished_at=as_utc(row.finished_at) if row.finished_at is not None else None,
    )


def content_hash(result: RunResult) -> str:
    """A fingerprint of everything stored about a run: equal hashes mean nothing to update."""
    canonical = json.dumps(result.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_values(result: RunResult) -> dict[str, Any]:
    """The runs row for `result`, without the timestamps."""
    return {
        "run_id": result.run_id,
        "experiment_id": result.experiment_id,
        "case_id": result.case_id,
        "arm": result.arm,
        "trial": result.trial,
        "seed": result.seed,
        "status": result.status.value,
        "error": result.error,
        "score": result.score,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cost_usd": result.usage.cost_usd,
        "wall_s": result.wall_s,
        "exit_code": result.exit_code,
        "provider": result.provider,
        "image": result.image,
        "commit": result.commit,
        "limits": dict(result.limits),
        "world_version": result.world_version,
        "evalbot_version": result.evalbot_version,
        "outputs_ref": result.outputs_ref,
        "sandbox_usage": result.sandbox.model_dump(mode="json"),
        "provision_s": result.provision_s,
        "content_hash": content_hash(result),
    }


def criterion_values(result: RunResult) -> list[dict[str, Any]]:
    return [
        {
            "run_id": result.run_id,
            "name": criterion.name,
            "position": position,
            "grader": criterion.grader,
            "weight": criterion.weight,
            "score": criterion.score,
            "rationale": criterion.rationale,
            "rubric_hash": criterion.rubric_hash,
            "judge": criterion.judge.model_dump(mode="json") if criterion.judge else None,
        }
        for position, criterion in enumerate(result.criteria)
    ]


def run_result(row: Any, criteria: list[Any]) -> RunResult:
    """A RunResult from a runs row and its criterion_scores rows (in position order)."""
    return RunResult(
        run_id=row.run_id,
        experiment_id=row.experiment_id,
        case_id=row.case_id,
        arm=row.arm,
        trial=row.trial,
        seed=row.seed,
        status=RunStatus(row.status),
        error=row.error,
        score=row.score,
        criteria=tuple(_criterion(c) for c in criteria),
        usage=Usage(
            input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd=row.cost_usd
        ),
        wall_s=row.wall_s,
        exit_code=row.exit_code,
        provider=row.provider,
        image=row.image,
        commit=row.commit,
        limits=row.limits,
        world_version=row.world_version,
        evalbot_version=row.evalbot_version,
        outputs_ref=row.outputs_ref,
        sandbox=SandboxUsage.model_validate(row.sandbox_usage or {}),
        provision_s=row.provision_s,
    )


def _criterion(row: Any) -> CriterionScore:
    return CriterionScore(
        name=row.name,
        grader=row.grader,
        weight=row.weight,
        score=row.score,
        rationale=row.rationale,
        rubric_hash=row.rubric_hash,
        judge=JudgeRecord.model_validate(row.judge) if row.judge is not None else None,
    )


def run_cost(agent_usd: float, sandbox_usage: dict[str, Any] | None) -> float:
    """A stored run's cost: the agent's own plus its sandbox's (as RunResult reports them)."""
    return agent_usd + SandboxUsage.model_validate(sandbox_usage or {}).cost_usd
