"""Reading and writing the `prewarmed_images` table: every prewarmed image a provider holds
(docs/prewarm.md). `PrewarmRecord` is one row (the table is `tables.PrewarmedImageRow`, created by
migration 0004). The `evalbot prewarm` command writes it; `prewarm status` and retention read it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, select, update

from workflows.store.engine import WRITE_OPTION, make_engine, parse_url, translated_errors
from workflows.store.tables import prewarmed_images


class PrewarmRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    repo: str
    commit: str
    provider: str
    reference: str
    build_seconds: float
    size_bytes: int | None = None
    created_at: datetime
    checked_at: datetime

    def age_s(self, now: datetime) -> float:
        """Seconds since a prewarm run last found this image current."""
        return max(0.0, (now - self.checked_at).total_seconds())


class PrewarmRecords:
    """Rows of `prewarmed_images` (the schema must be migrated: `Store.migrate()`). StoreError on
    any database failure."""

    def __init__(self, url: str) -> None:
        self._url = parse_url(url)
        self._engine = make_engine(self._url)
        self._writer = self._engine.execution_options(**{WRITE_OPTION: True})

    def close(self) -> None:
        self._engine.dispose()

    def add(self, record: PrewarmRecord) -> None:
        with translated_errors(self._url), self._writer.begin() as connection:
            connection.execute(prewarmed_images.insert().values(**record.model_dump()))

    def touch(self, provider: str, reference: str, checked_at: datetime) -> None:
        """A prewarm run found the image still current (its repo's head did not move)."""
        where = _key(provider, reference)
        with translated_errors(self._url), self._writer.begin() as connection:
            connection.execute(update(prewarmed_images).where(*where).values(checked_at=checked_at))

    def delete(self, provider: str, reference: str) -> None:
        with translated_errors(self._url), self._writer.begin() as connection:
            connection.execute(delete(prewarmed_images).where(*_key(provider, reference)))

    def records(self, repo: str | None = None) -> list[PrewarmRecord]:
        """Newest first."""
        query = select(prewarmed_images).order_by(prewarmed_images.c.created_at.desc())
        if repo is not None:
            query = query.where(prewarmed_images.c.repo == repo)
        with translated_errors(self._url), self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [_record(dict(row)) for row in rows]

    def newest_per_repo(self) -> list[PrewarmRecord]:
        newest: dict[str, PrewarmRecord] = {}
        for record in self.records():
            newest.setdefault(record.repo, record)
        return sorted(newest.values(), key=lambda r: r.repo)


def _key(provider: str, reference: str) -> tuple[Any, Any]:
    return (prewarmed_images.c.provider == provider, prewarmed_images.c.reference == reference)


def _record(row: dict[str, Any]) -> PrewarmRecord:
    for name in ("created_at", "checked_at"):
        if isinstance(row[name], datetime) and row[name].tzinfo is None:  # SQLite drops the zone
            row[name] = row[name].replace(tzinfo=UTC)
    return PrewarmRecord.model_validate(row)
