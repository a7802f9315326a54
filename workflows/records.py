"""Plain records passed between stages, the store, scoring and the report.

They carry ids, numbers and short text only — never transcripts (those live in the blob store).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunStatus(StrEnum):
    """A run ends `scored` or with an explicit error class. How each class enters the numbers
    (the agent's failures count at the criteria's floor, infrastructure is excluded) is decided
    in one place: workflows/outcomes.py."""

    SCORED = "scored"
    AGENT_ERROR = "agent_error"  # the agent exited non-zero or crashed
    TIMEOUT = "timeout"  # the agent exceeded run.timeout_s
    OUT_OF_MEMORY = "out_of_memory"  # killed by the memory limit
    RESOURCE_LIMIT = "resource_limit"  # process, file-size, disk or output limit hit
    OUTPUT_ERROR = "output_error"  # finished but produced no readable answer
    SANDBOX_ERROR = "sandbox_error"  # infrastructure: the sandbox could not start or died
    JUDGE_ERROR = "judge_error"  # infrastructure: a grader could not grade
    CANCELLED = "cancelled"

    @property
    def is_error(self) -> bool:
        return self is not RunStatus.SCORED


class JudgeRecord(BaseModel):
    """What an LLM judge did for one criterion of one run: kept apart from the agent's usage."""

    model_config = ConfigDict(frozen=True)

    model: str = ""
    prompt_version: str = Field("", description="Hash of the judge prompt template.")
    samples: int = Field(1, description="How many times the judge was asked (judge_samples).")
    sample_scores: tuple[float, ...] = ()
    agreement: float | None = Field(None, description="Share of samples on the majority side.")
    calls: int = Field(0, description="API requests made for this grade; 0 = all from the cache.")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class CriterionScore(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    grader: str
    weight: float
    score: float | None = Field(None, description="In [0, 1]; None = not judged (no judge).")
    rationale: str = ""
    rubric_hash: str = Field("", description="Hash of the criterion's definition when scored.")
    judge: JudgeRecord | None = Field(None, description="Set for criteria an LLM judge graded.")


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class SandboxUsage(BaseModel):
    """What the run's sandbox used and cost as its provider bills it — apart from the agent's own
    usage. Zero for providers that bill nothing (local, process)."""

    model_config = ConfigDict(frozen=True)

    cpu_seconds: float = Field(0.0, description="CPU time the agent's processes used.")
    billed_cpu_seconds: float = Field(0.0, description="Core-seconds billed (used or reserved).")
    memory_gib_seconds: float = Field(0.0, description="Memory billed, GiB x seconds.")
    sandbox_seconds: float = Field(0.0, description="How long the sandbox existed.")
    cost_usd: float = Field(0.0, description="Estimate from settings.sandbox.prices.")


class RunResult(BaseModel):
    """The stored outcome of one cell. Saving the same `run_id` twice changes nothing."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    experiment_id: str
    case_id: str
    arm: str
    trial: int
    seed: int
    status: RunStatus
    error: str = Field("", description="One sentence on what went wrong, for error statuses.")
    score: float | None = None
    criteria: tuple[CriterionScore, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    wall_s: float = 0.0
    exit_code: int | None = None
    # What makes the run reproducible:
    provider: str = ""
    image: str = Field("", description="Prewarmed image reference or built commit.")
    commit: str = ""
    limits: dict[str, Any] = Field(default_factory=dict)
    world_version: str = ""
    evalbot_version: str = ""
    outputs_ref: str = Field(
        "",
        description='Blob-store key of the run\'s outputs (docs/store.md, "Blobs"); no host path.',
    )
    sandbox: SandboxUsage = Field(default_factory=SandboxUsage)
    provision_s: float | None = Field(
        None,
        description="Seconds the provision attempt that made the run's sandbox took; None when no "
        "sandbox was made (or the run was stored before migration 0006).",
    )


def weighted_score(criteria: tuple[CriterionScore, ...] | list[CriterionScore]) -> float | None:
    """The run's score: weighted mean over the criteria that were graded."""
    graded = [c for c in criteria if c.score is not None]
    total = sum(c.weight for c in graded)
    if not graded or total <= 0:
        return None
    return sum(c.weight * (c.score or 0.0) for c in graded) / total
