"""Catalog: the vocabulary of docs/architecture.md as pydantic models, and their loaders."""

from workflows.catalog.catalog_errors import CatalogError
from workflows.catalog.models import (
    AgentRepoConfig,
    ArmSpec,
    Case,
    CellRef,
    Criterion,
    Dataset,
    ExperimentSpec,
    GraderKind,
    Rubric,
    World,
)

__all__ = [
    "AgentRepoConfig",
    "ArmSpec",
    "Case",
    "CatalogError",
    "CellRef",
    "Criterion",
    "Dataset",
    "ExperimentSpec",
    "GraderKind",
    "Rubric",
    "World",
]
