"""Build the sync and status from settings: the one place that wires Vault, sink, records and
fingerprints together. The CLI and the scheduled job call these; tests build the parts directly."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from infra.secrets.fingerprint import Fingerprinter
from infra.secrets.mapping import load_mapping
from infra.secrets.secret_errors import SecretsError
from infra.secrets.secret_records import SqlSyncRecordStore, SyncRecordStore
from infra.secrets.sinks import build_sink
from infra.secrets.status import GroupStatus, group_statuses
from infra.secrets.sync import GroupChange, SecretSync
from infra.secrets.vault import login
from workflows.settings import Settings
from workflows.store import Store, StoreError


def record_store(settings: Settings) -> SyncRecordStore:
    """The `secret_syncs` table of the configured database, migrated to the newest schema."""
    try:
        with Store.from_settings(settings) as store:
            store.migrate()
    except StoreError as error:
        raise SecretsError(str(error)) from None
    return SqlSyncRecordStore(settings.resolved_database_url)


def build_sync(settings: Settings, environ: Mapping[str, str]) -> SecretSync:
    """Load the mapping (failing on a bad one before any login), log in, pick the sink."""
    return SecretSync(
        mapping=load_mapping(settings.secrets.mapping_path),
        reader=login(settings, environ),
        sink=build_sink(settings),
        records=record_store(settings),
        fingerprinter=Fingerprinter.from_settings(settings),
    )


def sync_secrets(
    settings: Settings, environ: Mapping[str, str], *, now: datetime, dry_run: bool = False
) -> list[GroupChange]:
    """Run (or preview) one sync; raises SecretsError with a one-sentence reason on any failure."""
    return build_sync(settings, environ).run(now=now, dry_run=dry_run)


def secret_status(settings: Settings, *, now: datetime) -> list[GroupStatus]:
    mapping = load_mapping(settings.secrets.mapping_path)
    stale_after = timedelta(seconds=settings.secrets.stale_after_s)
    return group_statuses(mapping, record_store(settings).load(), now=now, stale_after=stale_after)
