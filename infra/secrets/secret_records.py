"""What a sync remembers per group — Vault version, key names, keyed fingerprints, times — and
where it keeps it: the `secret_syncs` table of the evalbot database (`SqlSyncRecordStore`), or a
JSON file (`JsonSyncRecordStore`, for tests and tools without a database). Never a value."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select

from infra.secrets.secret_errors import SecretsError
from workflows.store import StoreError
from workflows.store.engine import (
    WRITE_OPTION,
    make_engine,
    parse_url,
    translated_errors,
)
from workflows.store.tables import secret_syncs
from workflows.store.upsert import insert


class SyncRecord(BaseModel):
    """The last successful sync of one secret group."""

    model_config = ConfigDict(frozen=True)

    group: str
    vault_path: str = Field(description="mount/path of the source secret.")
    vault_version: int
    vault_created_at: datetime | None = Field(None, description="When that version was written.")
    keys: tuple[str, ...]
    key_fingerprints: dict[str, str] = Field(description="key -> keyed HMAC of its value.")
    fingerprint: str = Field(description="Keyed HMAC of the whole group.")
    sink: str
    synced_at: datetime = Field(description="Last time a sync confirmed the group current.")
    changed_at: datetime = Field(description="Last time a sync wrote the group.")


class SyncRecordStore(Protocol):
    """Where sync records live; `save` replaces the records of the groups it is given."""

    def load(self) -> dict[str, SyncRecord]: ...

    def save(self, records: Iterable[SyncRecord]) -> None: ...


class JsonSyncRecordStore:
    """Records in one JSON file, rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, SyncRecord]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            records = [SyncRecord.model_validate(item) for item in raw]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, ValidationError) as error:
            raise SecretsError(
                f"secret sync records {self.path} are unreadable ({type(error).__name__})"
            ) from None
        return {r.group: r for r in records}

    def save(self, records: Iterable[SyncRecord]) -> None:
        merged = self.load() | {r.group: r for r in records}
        payload = json.dumps([merged[g].model_dump(mode="json") for g in sorted(merged)], indent=1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temp.write_text(payload, encoding="utf-8")
        os.replace(temp, self.path)


class SqlSyncRecordStore:
    """Records in the `secret_syncs` table (the schema must be migrated: `Store.migrate()`)."""

    def __init__(self, url: str) -> None:
        try:
            self._url = parse_url(url)
            self._engine = make_engine(self._url)
        except StoreError as error:
            raise SecretsError(str(error)) from None

    def load(self) -> dict[str, SyncRecord]:
        try:
            with translated_errors(self._url), self._engine.connect() as connection:
                rows = connection.execute(select(secret_syncs)).mappings().all()
        except StoreError as error:
            raise SecretsError(str(error)) from None
        records = [_from_row(dict(row)) for row in rows]
        return {r.group: r for r in records}

    def save(self, records: Iterable[SyncRecord]) -> None:
        writer = self._engine.execution_options(**{WRITE_OPTION: True})
        try:
            with translated_errors(self._url), writer.begin() as connection:
                for record in records:
                    values = _to_row(record)
                    stmt = insert(connection.dialect.name, secret_syncs).values(**values)
                    update = {k: v for k, v in values.items() if k != "group_name"}
                    connection.execute(
                        stmt.on_conflict_do_update(index_elements=["group_name"], set_=update)
                    )
        except StoreError as error:
            raise SecretsError(str(error)) from None

    def close(self) -> None:
        self._engine.dispose()


def _to_row(record: SyncRecord) -> dict[str, object]:
    data = record.model_dump(mode="python")
    data["group_name"] = data.pop("group")
    data["keys"] = list(record.keys)
    return data


def _from_row(row: dict[str, object]) -> SyncRecord:
    row["group"] = row.pop("group_name")
    for field in ("vault_created_at", "synced_at", "changed_at"):
        value = row[field]
        if isinstance(value, datetime) and value.tzinfo is None:  # SQLite drops the zone
            row[field] = value.replace(tzinfo=UTC)
    return SyncRecord.model_validate(row)
