"""Sync records round-trip through the `secret_syncs` table (SQLite and PostgreSQL) and the JSON
file; saving replaces the given groups and keeps the others."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.secrets.secret_errors import SecretsError
from infra.secrets.secret_records import JsonSyncRecordStore, SqlSyncRecordStore, SyncRecord
from workflows.store import Store

T0 = datetime(2025, 3, 1, 8, 30, tzinfo=UTC)


def record(group: str, version: int, synced_at: datetime = T0) -> SyncRecord:
    return SyncRecord(
        group=group,
        vault_path=f"secret/evalbot/{group}",
        vault_version=version,
        vault_created_at=None if version == 1 else T0,
        keys=("A_KEY", "B_KEY"),
        key_fingerprints={"A_KEY": f"kid:{version}a", "B_KEY": f"kid:{version}b"},
        fingerprint=f"kid:{version}",
        sink="local",
        synced_at=synced_at,
        changed_at=T0,
    )


def check_round_trip(store: SqlSyncRecordStore | JsonSyncRecordStore) -> None:
    assert store.load() == {}
    store.save([record("a", 1), record("b", 1)])
    store.save([record("b", 2, synced_at=datetime(2025, 3, 1, 9, tzinfo=UTC))])

    loaded = store.load()

    assert loaded == {"a": record("a", 1), "b": record("b", 2, datetime(2025, 3, 1, 9, tzinfo=UTC))}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'evalbot.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def test_the_table_round_trips_records(database_url: str) -> None:
    with Store(database_url) as migrated:
        migrated.migrate()
    store = SqlSyncRecordStore(database_url)
    try:
        check_round_trip(store)
    finally:
        store.close()


def test_the_json_file_round_trips_records(tmp_path: Path) -> None:
    check_round_trip(JsonSyncRecordStore(tmp_path / "records.json"))


def test_an_unmigrated_database_fails_with_one_sentence(tmp_path: Path) -> None:
    store = SqlSyncRecordStore(f"sqlite:///{tmp_path / 'empty.db'}")

    with pytest.raises(SecretsError, match="no evalbot schema"):
        store.load()
