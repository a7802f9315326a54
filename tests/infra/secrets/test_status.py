"""`secrets status` flags: never synced, stale (older than the threshold), rotation overdue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from infra.secrets.mapping import parse_mapping
from infra.secrets.secret_records import SyncRecord
from infra.secrets.status import group_statuses

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
MAPPING = parse_mapping(
    {
        "groups": {
            "fresh": {"path": "p/fresh", "keys": ["K"], "rotation_days": 30},
            "stale": {"path": "p/stale", "keys": ["K"]},
            "old": {"path": "p/old", "keys": ["K"], "rotation_days": 30},
            "never": {"path": "p/never", "keys": ["K"]},
        }
    },
    "test",
)


def record(group: str, synced_ago: timedelta, version_age: timedelta) -> SyncRecord:
    return SyncRecord(
        group=group,
        vault_path=f"secret/p/{group}",
        vault_version=3,
        vault_created_at=NOW - version_age,
        keys=("K",),
        key_fingerprints={"K": "id:fp"},
        fingerprint="id:fp",
        sink="local",
        synced_at=NOW - synced_ago,
        changed_at=NOW - synced_ago,
    )


def test_status_flags_never_synced_stale_and_overdue_groups() -> None:
    records = {
        "fresh": record("fresh", timedelta(minutes=50), timedelta(days=29)),
        "stale": record("stale", timedelta(hours=2, minutes=1), timedelta(days=1)),
        "old": record("old", timedelta(minutes=5), timedelta(days=31)),
    }

    statuses = {
        s.group: s
        for s in group_statuses(MAPPING, records, now=NOW, stale_after=timedelta(hours=2))
    }

    assert statuses["fresh"].flags == ()
    assert statuses["fresh"].age == timedelta(minutes=50)
    assert statuses["fresh"].version == 3
    assert statuses["stale"].flags == ("stale: not synced for 2.0 h",)
    assert statuses["old"].flags == ("rotation overdue: version is 31 days old (policy 30 days)",)
    assert statuses["never"].flags == ("never synced",)
    assert statuses["never"].version is None


def test_a_group_synced_exactly_at_the_threshold_is_not_yet_stale() -> None:
    records = {"stale": record("stale", timedelta(hours=2), timedelta(days=1))}

    [status] = [
        s
        for s in group_statuses(MAPPING, records, now=NOW, stale_after=timedelta(hours=2))
        if s.group == "stale"
    ]

    assert status.ok
