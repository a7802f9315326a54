"""`evalbot secrets status`: each mapped group's age and Vault version, with flags for groups never
synced, not synced within `settings.secrets.stale_after_s`, or older than their rotation policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from infra.secrets.mapping import GroupMapping, SecretMapping
from infra.secrets.secret_records import SyncRecord


@dataclass(frozen=True)
class GroupStatus:
    group: str
    vault_path: str
    version: int | None
    synced_at: datetime | None
    age: timedelta | None
    secret_age: timedelta | None
    flags: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.flags

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "vault_path": self.vault_path,
            "version": self.version,
            "synced_at": self.synced_at.isoformat() if self.synced_at else None,
            "age_s": round(self.age.total_seconds()) if self.age is not None else None,
            "secret_age_days": self.secret_age.days if self.secret_age is not None else None,
            "flags": list(self.flags),
        }


def group_statuses(
    mapping: SecretMapping, records: dict[str, SyncRecord], *, now: datetime, stale_after: timedelta
) -> list[GroupStatus]:
    return [
        _status(mapping, g, records.get(g.name), now, stale_after)
        for g in sorted(mapping.groups, key=lambda g: g.name)
    ]


def _status(
    mapping: SecretMapping,
    group: GroupMapping,
    record: SyncRecord | None,
    now: datetime,
    stale_after: timedelta,
) -> GroupStatus:
    path = f"{mapping.mount}/{group.path}"
    if record is None:
        return GroupStatus(group.name, path, None, None, None, None, ("never synced",))
    age = now - record.synced_at
    secret_age = now - record.vault_created_at if record.vault_created_at else None
    flags = []
    if age > stale_after:
        flags.append(f"stale: not synced for {_hours(age)}")
    if group.rotation_days and secret_age and secret_age > timedelta(days=group.rotation_days):
        flags.append(
            f"rotation overdue: version is {secret_age.days} days old "
            f"(policy {group.rotation_days} days)"
        )
    if record.vault_path != path:
        flags.append(f"mapping moved: last synced from {record.vault_path}")
    return GroupStatus(
        group.name, path, record.vault_version, record.synced_at, age, secret_age, tuple(flags)
    )


def _hours(age: timedelta) -> str:
    return f"{age.total_seconds() / 3600:.1f} h"


def format_age(age: timedelta | None) -> str:
    if age is None:
        return "-"
    seconds = int(age.total_seconds())
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds // 86400} d"
