"""Every sqlmodel table of the evalbot database, declared here and nowhere else. Their metadata is
what the migrations must produce (migrations/env.py, schema.py and revise.py read it from here).

Tables share a private `MetaData` (not `SQLModel.metadata`) with a naming convention, so constraint
and index names are the same on SQLite and PostgreSQL and other sqlmodel users cannot leak tables
into the migrations.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, MetaData, String, Text
from sqlmodel import Field, SQLModel

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class StoreModel(SQLModel):
    """Base of every evalbot table."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _timestamp(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None if nullable else ..., sa_type=DateTime(timezone=True), index=index)


class ExperimentRow(StoreModel, table=True):
    """One experiment. `spec` is the full ExperimentSpec; the other columns are for querying."""

    __tablename__ = "experiments"

    id: str = Field(primary_key=True, sa_type=String)
    repo: str = Field(sa_type=Text)
    dataset: str = Field(sa_type=String, index=True)
    spec: dict[str, Any] = Field(sa_type=JSON)
    status: str = Field(sa_type=String(32), index=True)
    trigger: str = Field(sa_type=String)
    labels: dict[str, Any] = Field(sa_type=JSON)
    created_at: datetime = _timestamp(index=True)
    finished_at: datetime | None = _timestamp(nullable=True)


class ArmRow(StoreModel, table=True):
    """One arm of an experiment: a harness at a commit plus a config."""

    __tablename__ = "arms"

    experiment_id: str = Field(
        primary_key=True, sa_type=String, foreign_key="experiments.id", ondelete="CASCADE"
    )
    name: str = Field(primary_key=True, sa_type=String)
    ref: str = Field(sa_type=Text)
    commit: str = Field(sa_type=String)
    config: dict[str, Any] = Field(sa_type=JSON)


class RunRow(StoreModel, table=True):
    """One cell's outcome. `content_hash` fingerprints the RunResult so a resave is a no-op."""

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_cell", "experiment_id", "case_id", "arm", "trial"),)

    run_id: str = Field(primary_key=True, sa_type=String)
    experiment_id: str = Field(sa_type=String, foreign_key="experiments.id", ondelete="CASCADE")
    case_id: str = Field(sa_type=String)
    arm: str = Field(sa_type=String)
    trial: int
    seed: int = Field(sa_type=BigInteger)
    status: str = Field(sa_type=String(32))
    error: str = Field(sa_type=Text)
    score: float | None = None
    input_tokens: int = Field(sa_type=BigInteger)
    output_tokens: int = Field(sa_type=BigInteger)
    cost_usd: float
    wall_s: float
    exit_code: int | None = None
    provider: str = Field(sa_type=String)
    image: str = Field(sa_type=Text)
    commit: str = Field(sa_type=String)
    limits: dict[str, Any] = Field(sa_type=JSON)
    world_version: str = Field(sa_type=String)
    evalbot_version: str = Field(sa_type=String)
    outputs_ref: str = Field(sa_type=Text)
    sandbox_usage: dict[str, Any] | None = Field(default=None, sa_type=JSON)
    provision_s: float | None = None  # migration 0006; bot/metrics.py's latency histogram
    content_hash: str = Field(sa_type=String(64))
    created_at: datetime = _timestamp()
    updated_at: datetime = _timestamp()


class CriterionScoreRow(StoreModel, table=True):
    """One criterion's score in one run; `position` keeps the rubric's order."""

    __tablename__ = "criterion_scores"

    run_id: str = Field(
        primary_key=True, sa_type=String, foreign_key="runs.run_id", ondelete="CASCADE"
    )
    name: str = Field(primary_key=True, sa_type=String)
    position: int
    grader: str = Field(sa_type=String)
    weight: float
    score: float | None = None
    rationale: str = Field(sa_type=Text)
    rubric_hash: str = Field(default="", sa_type=String(64))  # migration 0003
    judge: dict[str, Any] | None = Field(default=None, sa_type=JSON)  # migration 0003


class WebhookDeliveryRow(StoreModel, table=True):
    """A GitHub webhook delivery (X-GitHub-Delivery), for de-duplication across processes and
    hosts: claimed while `lease_expires_at` is set (being handled), handled once it is NULL. A
    failed delivery's row is deleted, so that a redelivery runs (docs/github-bot.md)."""

    __tablename__ = "webhook_deliveries"

    delivery_id: str = Field(primary_key=True, sa_type=String)
    event: str = Field(sa_type=String)
    received_at: datetime = _timestamp()
    lease_expires_at: datetime | None = _timestamp(nullable=True)  # migration 0008


class SecretSyncRow(StoreModel, table=True):
    """The last successful Vault -> provider sync of one secret group: key names, versions, keyed
    fingerprints and times, never a secret value (infra/secrets/secret_records.py: SyncRecord)."""

    __tablename__ = "secret_syncs"

    group_name: str = Field(primary_key=True, sa_type=String)
    vault_path: str = Field(sa_type=Text)
    vault_version: int
    vault_created_at: datetime | None = Field(default=None, sa_type=DateTime(timezone=True))
    keys: list[str] = Field(sa_type=JSON)
    key_fingerprints: dict[str, Any] = Field(sa_type=JSON)
    fingerprint: str = Field(sa_type=String(80))
    sink: str = Field(sa_type=String(32))
    synced_at: datetime = Field(sa_type=DateTime(timezone=True))
    changed_at: datetime = Field(sa_type=DateTime(timezone=True))


class PrewarmedImageRow(StoreModel, table=True):
    """One prewarmed image a provider holds (docs/prewarm.md; prewarmed_images.py: PrewarmRecord):
    the agent repository and commit it was built from, the provider's image reference (a snapshot
    folder for `local`, a named image for `modal`), build time, size, when it was built and when a
    prewarm run last found it still current (`checked_at`)."""

    __tablename__ = "prewarmed_images"

    provider: str = Field(primary_key=True, sa_type=String(32))
    reference: str = Field(primary_key=True, sa_type=Text)
    repo: str = Field(sa_type=Text, index=True)
    commit: str = Field(sa_type=String(64))
    build_seconds: float = Field(sa_type=Float)
    size_bytes: int | None = Field(default=None, sa_type=BigInteger)
    created_at: datetime = Field(sa_type=DateTime(timezone=True))
    checked_at: datetime = Field(sa_type=DateTime(timezone=True))


class RateBucketRow(StoreModel, table=True):
    """One rate limit shared by every process of the database (workflows/store/rate_limits.py):
    `next_at` is when the bucket's next slot is free (GCRA's theoretical arrival time), in
    seconds since the epoch on the database's clock (PostgreSQL) or the host's (SQLite)."""

    __tablename__ = "rate_buckets"

    name: str = Field(primary_key=True, sa_type=String(64))
    next_at: float = Field(sa_type=Float)


metadata = StoreModel.metadata
experiments = metadata.tables["experiments"]
arms = metadata.tables["arms"]
runs = metadata.tables["runs"]
criterion_scores = metadata.tables["criterion_scores"]
webhook_deliveries = metadata.tables["webhook_deliveries"]
secret_syncs = metadata.tables["secret_syncs"]
prewarmed_images = metadata.tables["prewarmed_images"]
rate_buckets = metadata.tables["rate_buckets"]
