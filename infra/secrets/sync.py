"""`evalbot secrets sync`: copy each mapped Vault secret's allowlisted keys into the provider's
secret group, all or nothing.

1. Stage: read every mapped path and check every allowlisted key is present. Any failure
   (unreachable, sealed, denied, missing) raises before anything is written.
2. Compare with the last records (version, key names, keyed fingerprints) and the sink's groups.
3. Commit the changed groups to the sink in one go, then save the records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from infra.secrets.fingerprint import Fingerprinter
from infra.secrets.mapping import GroupMapping, SecretMapping
from infra.secrets.secret_errors import MissingKey
from infra.secrets.secret_records import SyncRecord, SyncRecordStore
from infra.secrets.sink import SecretSink
from infra.secrets.vault import SecretReader, VaultSecret


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class GroupChange:
    """What a sync does (or would do) to one group: key names and versions only."""

    group: str
    vault_path: str
    action: Action
    old_version: int | None
    new_version: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    def describe(self, *, dry_run: bool) -> str:
        verb = {
            Action.CREATE: "would create" if dry_run else "created",
            Action.UPDATE: "would update" if dry_run else "updated",
            Action.UNCHANGED: "unchanged",
        }[self.action]
        version = f"v{self.new_version}"
        if self.action is Action.UPDATE and self.old_version is not None:
            version = f"v{self.old_version} -> v{self.new_version}"
        parts = [f"{label}: {', '.join(keys)}" for label, keys in self._key_changes() if keys]
        detail = f" ({'; '.join(parts)})" if parts else ""
        return f"{self.group}: {verb} {version} from {self.vault_path}{detail}"

    def _key_changes(self) -> list[tuple[str, tuple[str, ...]]]:
        return [("added", self.added), ("removed", self.removed), ("changed", self.changed)]

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "vault_path": self.vault_path,
            "action": self.action.value,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
        }


@dataclass(frozen=True)
class StagedGroup:
    """One group read from Vault and narrowed to its allowlist. `values` never leave this module
    except into the sink."""

    mapping: GroupMapping
    secret: VaultSecret
    values: Mapping[str, str]
    key_fingerprints: Mapping[str, str]
    fingerprint: str

    def __repr__(self) -> str:
        return f"StagedGroup({self.mapping.name!r}, v{self.secret.version})"


@dataclass
class SecretSync:
    """One sync run's collaborators, built at the edge and passed in."""

    mapping: SecretMapping
    reader: SecretReader
    sink: SecretSink
    records: SyncRecordStore
    fingerprinter: Fingerprinter

    def run(self, *, now: datetime, dry_run: bool = False) -> list[GroupChange]:
        staged = [self._stage(group) for group in self.mapping.groups]
        previous = self.records.load()
        present = self.sink.existing_groups()
        changes = [_compare(s, previous.get(s.mapping.name), present) for s in staged]
        if dry_run:
            return changes
        changed = {c.group for c in changes if c.action is not Action.UNCHANGED}
        if changed:
            self.sink.commit(
                {s.mapping.name: s.values for s in staged if s.mapping.name in changed}
            )
        self.records.save(self._record(s, previous, changed, now) for s in staged)
        return changes

    def _stage(self, group: GroupMapping) -> StagedGroup:
        secret = self.reader.read(self.mapping.mount, group.path)
        missing = [k for k in group.keys if k not in secret.data]
        if missing:
            raise MissingKey(
                f"{secret.path} (version {secret.version}) lacks key {', '.join(missing)} "
                f"needed by secret group '{group.name}'"
            )
        values = {k: secret.data[k] for k in group.keys}
        key_fps = self.fingerprinter.values(group.name, values)
        return StagedGroup(group, secret, values, key_fps, self.fingerprinter.group(key_fps))

    def _record(
        self,
        staged: StagedGroup,
        previous: Mapping[str, SyncRecord],
        changed: set[str],
        now: datetime,
    ) -> SyncRecord:
        name = staged.mapping.name
        old = previous.get(name)
        return SyncRecord(
            group=name,
            vault_path=staged.secret.path,
            vault_version=staged.secret.version,
            vault_created_at=staged.secret.created_time,
            keys=tuple(sorted(staged.values)),
            key_fingerprints=dict(staged.key_fingerprints),
            fingerprint=staged.fingerprint,
            sink=self.sink.name,
            synced_at=now,
            changed_at=now if name in changed or old is None else old.changed_at,
        )


def _compare(staged: StagedGroup, old: SyncRecord | None, present: set[str]) -> GroupChange:
    name, secret = staged.mapping.name, staged.secret
    if old is None or name not in present:
        return GroupChange(name, secret.path, Action.CREATE, None, secret.version)
    new_fps, old_fps = staged.key_fingerprints, old.key_fingerprints
    added = tuple(sorted(set(new_fps) - set(old_fps)))
    removed = tuple(sorted(set(old_fps) - set(new_fps)))
    changed = tuple(sorted(k for k in set(new_fps) & set(old_fps) if new_fps[k] != old_fps[k]))
    same = staged.fingerprint == old.fingerprint and not (added or removed or changed)
    action = Action.UNCHANGED if same else Action.UPDATE
    return GroupChange(
        name, secret.path, action, old.vault_version, secret.version, added, removed, changed
    )
