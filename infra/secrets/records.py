"""What a sync remembers per group — Vault version, key names, keyed fingerprints, times — and
where it keeps it. Never a value."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from infra.secrets.errors import SecretsError


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
    """Records in one JSON file, rewritten atomically (until the database table replaces it)."""

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
