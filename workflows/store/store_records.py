"""What the store hands back for an experiment, and the experiment lifecycle statuses."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from workflows.catalog.models import ExperimentSpec


class ExperimentStatus(StrEnum):
    """An experiment's lifecycle. The terminal ones stamp `finished_at`."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in {
            ExperimentStatus.COMPLETED,
            ExperimentStatus.FAILED,
            ExperimentStatus.CANCELLED,
        }


class ExperimentRecord(BaseModel):
    """A stored experiment: its spec as saved, where it stands, and when it started and ended."""

    model_config = ConfigDict(frozen=True)

    spec: ExperimentSpec
    status: ExperimentStatus
    created_at: datetime
    finished_at: datetime | None = None

    @property
    def experiment_id(self) -> str:
        return self.spec.experiment_id
