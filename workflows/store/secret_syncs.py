"""The `secret_syncs` table: the last successful Vault -> provider sync of each secret group.

Key names, versions, keyed fingerprints and times only — never a secret value. Written and read by
`infra.secrets.records.SqlSyncRecordStore`; registered in `workflows.store.tables`' metadata.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, String, Text
from sqlmodel import Field

from workflows.store.tables import StoreModel


class SecretSyncRow(StoreModel, table=True):
    """One secret group's last sync (see infra/secrets/records.py: SyncRecord)."""

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


secret_syncs = StoreModel.metadata.tables["secret_syncs"]
