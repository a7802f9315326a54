"""Pydantic models for worlds, datasets, cases, rubrics, arms and experiments."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
MAX_NAME_LENGTH = 100  # workflows/catalog/names.py: the one check for names from outside


class GraderKind(StrEnum):
    CONTAINS_ALL = "contains_all"
    CONTAINS_ANY = "contains_any"
    NOT_CONTAINS = "not_contains"
    REGEX = "regex"
    NUMBER_WITHIN = "number_within"
    JSON_FIELD_EQUALS = "json_field_equals"
    FILE_CREATED = "file_created"
    FILE_CHANGED = "file_changed"
    SQL_QUERY = "sql_query"
    LLM = "llm"

    @property
    def is_deterministic(self) -> bool:
        return self is not GraderKind.LLM


class Criterion(BaseModel):
    """One weighted criterion. `name` is the reporting key shared across cases ("accuracy")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    grader: GraderKind
    weight: float = Field(1.0, gt=0)
    description: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    floor: float = Field(
        0.0,
        ge=0,
        le=1,
        description="The score of this criterion when the agent fails the run (crash, timeout, "
        "limits, no answer): 0 unless the dataset needs another (docs/statistics.md).",
    )


SecretGroupName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)]


class Rubric(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    criteria: tuple[Criterion, ...] = Field(min_length=1)

    @field_validator("criteria")
    @classmethod
    def _unique_names(cls, criteria: tuple[Criterion, ...]) -> tuple[Criterion, ...]:
        names = [c.name for c in criteria]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"criterion names must be unique within a case: {duplicates}")
        return criteria


class Case(BaseModel):
    """One task: a prompt (plus attachments) inside a world, and a rubric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    prompt: str = Field(min_length=1)
    world: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    tags: tuple[str, ...] = ()
    attachments: tuple[str, ...] = Field((), description="World-relative paths given to the agent.")
    rubric: Rubric
    reference: str | None = Field(None, description="A reference answer (reference.md), if kept.")


class Dataset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    description: str = ""
    default_trials: int = Field(3, ge=1)
    cases: tuple[Case, ...] = Field(min_length=1)
    secret_groups: tuple[SecretGroupName, ...] = Field(
        (), description="The secret groups this dataset's agents need (docs/secrets.md)."
    )
    fork_safe_secret_groups: tuple[SecretGroupName, ...] = Field(
        (),
        description="Those of `secret_groups` an approved fork pull request may receive; runs "
        "of fork PRs get no other group (docs/secrets.md, 'Fork pull requests').",
    )

    @model_validator(mode="after")
    def _fork_safe_are_declared(self) -> Dataset:
        undeclared = sorted(set(self.fork_safe_secret_groups) - set(self.secret_groups))
        if undeclared:
            raise ValueError(
                f"fork_safe_secret_groups {undeclared} are not in secret_groups; "
                "list them there too"
            )
        return self

    @property
    def withheld_from_forks(self) -> tuple[str, ...]:
        """The declared groups a fork PR does not get."""
        return tuple(g for g in self.secret_groups if g not in self.fork_safe_secret_groups)

    def select(self, selectors: list[str] | tuple[str, ...] = ()) -> list[Case]:
        """Cases matching any selector (`ID` or `tag:T`); all cases when none is given."""
        if not selectors:
            return list(self.cases)
        unknown = [s for s in selectors if not self._matches_any(s)]
        if unknown:
            from workflows.catalog.catalog_errors import UnknownNameError

            raise UnknownNameError("case selector", unknown[0], [c.id for c in self.cases])
        return [c for c in self.cases if any(_selects(s, c) for s in selectors)]

    def _matches_any(self, selector: str) -> bool:
        return any(_selects(selector, c) for c in self.cases)


def _selects(selector: str, case: Case) -> bool:
    if selector.startswith("tag:"):
        return selector[4:] in case.tags
    return selector == case.id


class World(BaseModel):
    """A reproducible snapshot of a matter; `version` is the content hash of its folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    description: str = ""
    path: Path
    version: str
    database: str | None = Field(None, description="World-relative path of the SQLite database.")
    permissions: str | None = Field(
        None, description="World-relative path of the permissions file."
    )
    acting_user: str | None = None


class BuildConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    setup: str = "true"
    incremental: str | None = None


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    timeout_s: int = Field(1800, gt=0)


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu: float = Field(1.0, gt=0)
    memory_mb: int = Field(2048, gt=0)
    pids: int = Field(256, gt=0)
    disk_mb: int = Field(1024, gt=0)
    allow_domains: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()


class AgentRepoConfig(BaseModel):
    """The agent repository's `evalbot.toml` (docs/architecture.md, "The agent repository
    contract")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    build: BuildConfig = Field(default_factory=BuildConfig)
    run: RunConfig
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)


class ArmSpec(BaseModel):
    """An agent harness at a commit plus a config (model, mode, any key=value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)
    ref: str = Field(min_length=1)
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    config: dict[str, str] = Field(default_factory=dict)


class CellRef(BaseModel):
    """One cell of the experiment tensor; `run_id` doubles as the RunWorkflow id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str
    case_id: str
    arm: str
    trial: int = Field(ge=0)
    seed: int

    @property
    def run_id(self) -> str:
        return cell_run_id(self.experiment_id, self.case_id, self.arm, self.trial)


def cell_run_id(experiment_id: str, case_id: str, arm: str, trial: int) -> str:
    """A cell's run id (CellRef.run_id), without building the cell."""
    return f"{experiment_id}/{case_id}/{arm}/{trial}"


class ExperimentSpec(BaseModel):
    """Everything needed to (re)plan an experiment: ids and references, never outputs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment_id: str = Field(min_length=1)
    repo: str = Field(min_length=1, description="Path or URL of the agent repository.")
    dataset: str
    case_ids: tuple[str, ...] = Field(min_length=1)
    arms: tuple[ArmSpec, ...] = Field(min_length=1)
    trials: int = Field(ge=1)
    seed: int = 0
    trigger: str = "cli"
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_arms(self) -> ExperimentSpec:
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must be unique: {names}")
        return self

    def cells(self) -> list[CellRef]:
        """The tensor in a stable order. The seed depends on case and trial, not on the arm,
        so arms are compared on the same random draws (common random numbers)."""
        return [
            CellRef(
                experiment_id=self.experiment_id,
                case_id=case_id,
                arm=arm.name,
                trial=trial,
                seed=cell_seed(self.seed, case_id, trial),
            )
            for case_id in self.case_ids
            for arm in self.arms
            for trial in range(self.trials)
        ]

    @property
    def cell_count(self) -> int:
        """`len(self.cells())`, without building them."""
        return len(self.case_ids) * len(self.arms) * self.trials

    def run_ids(self) -> list[str]:
        """The run ids of `cells()`, in the same order, without their seeds (cheap: the
        dashboard orders thousands of runs by it)."""
        names = [arm.name for arm in self.arms]
        eid = self.experiment_id
        return [
            cell_run_id(eid, case_id, arm, trial)
            for case_id in self.case_ids
            for arm in names
            for trial in range(self.trials)
        ]

    def arm(self, name: str) -> ArmSpec:
        return next(a for a in self.arms if a.name == name)


def cell_seed(base_seed: int, case_id: str, trial: int) -> int:
    digest = hashlib.sha256(f"{base_seed}:{case_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
