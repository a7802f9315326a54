"""The sync against a real OpenBao dev server: create, rotate, dry-run, missing keys, and failures
(server dead mid-sync, sealed, missing path) leaving the previous groups and records intact."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta

import hvac
import pytest

from infra.secrets.secret_errors import MissingKey, SecretNotFound, VaultSealed, VaultUnreachable
from infra.secrets.secret_service import record_store
from infra.secrets.sync import Action
from infra.secrets.vault import VaultReader, VaultSecret
from tests.infra.secrets.conftest import make_sync, mapping_for, put_secret
from tests.support.openbao import OpenBaoServer
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def test_sync_creates_groups_then_updates_them_when_a_secret_rotates(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/llm", {"OPENAI_API_KEY": "sk-first-111111", "OTHER": "x"})
    mapping = mapping_for({"llm-keys": (f"{prefix}/llm", ["OPENAI_API_KEY"])})
    sync = make_sync(settings, mapping, root_reader)

    first = sync.run(now=T0)
    assert [(c.group, c.action, c.new_version) for c in first] == [("llm-keys", Action.CREATE, 1)]
    store = LocalSecretStore.from_settings(settings)
    assert store.read_group("llm-keys") == {"OPENAI_API_KEY": "sk-first-111111"}  # allowlist only

    put_secret(root_client, f"{prefix}/llm", {"OPENAI_API_KEY": "sk-second-22222", "OTHER": "x"})
    second = sync.run(now=T0 + timedelta(hours=1))
    assert [(c.action, c.old_version, c.new_version, c.changed) for c in second] == [
        (Action.UPDATE, 1, 2, ("OPENAI_API_KEY",))
    ]
    assert store.read_group("llm-keys") == {"OPENAI_API_KEY": "sk-second-22222"}

    record = sync.records.load()["llm-keys"]
    assert (record.vault_version, record.keys, record.synced_at) == (
        2,
        ("OPENAI_API_KEY",),
        T0 + timedelta(hours=1),
    )
    assert record.vault_created_at is not None


def test_an_unchanged_secret_is_not_rewritten_but_its_sync_time_moves(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/a", {"TOKEN": "tok-aaaaaaaa"})
    sync = make_sync(settings, mapping_for({"a": (f"{prefix}/a", ["TOKEN"])}), root_reader)
    sync.run(now=T0)
    generation = (settings.secrets_dir / "current").readlink()

    again = sync.run(now=T0 + timedelta(hours=1))

    assert again[0].action is Action.UNCHANGED
    assert (settings.secrets_dir / "current").readlink() == generation
    record = sync.records.load()["a"]
    assert (record.synced_at, record.changed_at) == (T0 + timedelta(hours=1), T0)


def test_a_group_missing_from_the_sink_is_recreated(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/a", {"TOKEN": "tok-aaaaaaaa"})
    put_secret(root_client, f"{prefix}/b", {"TOKEN": "tok-bbbbbbbb"})
    sync = make_sync(
        settings,
        mapping_for({"a": (f"{prefix}/a", ["TOKEN"]), "b": (f"{prefix}/b", ["TOKEN"])}),
        root_reader,
    )
    sync.run(now=T0)
    (settings.secrets_dir / "current" / "a.json").unlink()  # someone wiped the provider's copy

    changes = {c.group: c.action for c in sync.run(now=T0)}

    assert changes == {"a": Action.CREATE, "b": Action.UNCHANGED}
    assert LocalSecretStore.from_settings(settings).read_group("a") == {"TOKEN": "tok-aaaaaaaa"}


def test_the_local_store_is_private_to_the_service(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/a", {"TOKEN": "tok-aaaaaaaa"})
    make_sync(settings, mapping_for({"a": (f"{prefix}/a", ["TOKEN"])}), root_reader).run(now=T0)

    root = settings.secrets_dir
    generation = root / "current"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(generation.stat().st_mode) == 0o700
    assert stat.S_IMODE((generation / "a.json").stat().st_mode) == 0o600


def test_dry_run_reports_key_names_and_versions_and_writes_nothing(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/a", {"K1": "value-one-1111", "K2": "value-two-2222"})
    mapping = mapping_for({"a": (f"{prefix}/a", ["K1", "K2"])})
    sync = make_sync(settings, mapping, root_reader)
    sync.run(now=T0)
    put_secret(root_client, f"{prefix}/a", {"K1": "value-one-1111", "K2": "value-two-NEW2"})

    changes = sync.run(now=T0 + timedelta(hours=1), dry_run=True)

    described = changes[0].describe(dry_run=True)
    assert described == f"a: would update v1 -> v2 from secret/{prefix}/a (changed: K2)"
    assert LocalSecretStore.from_settings(settings).read_group("a")["K2"] == "value-two-2222"
    assert sync.records.load()["a"].vault_version == 1


def test_a_missing_allowlisted_key_fails_before_anything_is_written(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    put_secret(root_client, f"{prefix}/a", {"K1": "value-one-1111"})
    put_secret(root_client, f"{prefix}/b", {"K1": "value-bbb-1111"})
    mapping = mapping_for({"a": (f"{prefix}/a", ["K1"]), "b": (f"{prefix}/b", ["K1"])})
    sync = make_sync(settings, mapping, root_reader)
    sync.run(now=T0)
    put_secret(root_client, f"{prefix}/a", {"K1": "value-one-ROTATED"})
    put_secret(root_client, f"{prefix}/b", {"RENAMED": "value-bbb-1111"})

    with pytest.raises(MissingKey) as raised:
        sync.run(now=T0 + timedelta(hours=1))

    assert str(raised.value) == (
        f"secret/{prefix}/b (version 2) lacks key K1 needed by secret group 'b'"
    )
    store = LocalSecretStore.from_settings(settings)
    assert store.read_all() == {"a": {"K1": "value-one-1111"}, "b": {"K1": "value-bbb-1111"}}


def test_a_missing_path_is_named(settings: Settings, root_reader: VaultReader, prefix: str) -> None:
    sync = make_sync(settings, mapping_for({"a": (f"{prefix}/nope", ["K"])}), root_reader)

    with pytest.raises(SecretNotFound, match=f"no secret at secret/{prefix}/nope"):
        sync.run(now=T0)


class DiesAfterFirstRead:
    """Reads through a real VaultReader and kills the server right after the first read."""

    def __init__(self, inner: VaultReader, server: OpenBaoServer) -> None:
        self.inner, self.server, self.reads = inner, server, 0

    def read(self, mount: str, path: str) -> VaultSecret:
        self.reads += 1
        if self.reads == 2:
            self.server.stop()
        return self.inner.read(mount, path)


def test_server_dying_mid_sync_fails_clearly_and_leaves_every_group_intact(
    settings: Settings,
) -> None:
    with OpenBaoServer() as server:
        client = server.client()
        put_secret(client, "a", {"K": "old-value-aaaa"})
        put_secret(client, "b", {"K": "old-value-bbbb"})
        mapping = mapping_for({"a": ("a", ["K"]), "b": ("b", ["K"])})
        make_sync(settings, mapping, VaultReader(client)).run(now=T0)
        records_before = record_store(settings).load()
        put_secret(client, "a", {"K": "new-value-aaaa"})
        put_secret(client, "b", {"K": "new-value-bbbb"})
        dying = DiesAfterFirstRead(VaultReader(server.client()), server)

        with pytest.raises(VaultUnreachable) as raised:
            make_sync(settings, mapping, dying).run(now=T0 + timedelta(hours=1))

    assert dying.reads == 2
    message = str(raised.value)
    assert message.startswith(f"Vault at {server.url} is unreachable") and "\n" not in message
    store = LocalSecretStore.from_settings(settings)
    assert store.read_all() == {"a": {"K": "old-value-aaaa"}, "b": {"K": "old-value-bbbb"}}
    assert record_store(settings).load() == records_before
    leftovers = [p.name for p in settings.secrets_dir.iterdir() if p.name.startswith(".staging")]
    assert leftovers == []


def test_a_sealed_vault_fails_clearly_and_writes_nothing(settings: Settings) -> None:
    with OpenBaoServer() as server:
        client = server.client()
        put_secret(client, "a", {"K": "old-value-aaaa"})
        mapping = mapping_for({"a": ("a", ["K"])})
        client.sys.seal()

        with pytest.raises(VaultSealed, match="is sealed"):
            make_sync(settings, mapping, VaultReader(client)).run(now=T0)

    assert LocalSecretStore.from_settings(settings).read_all() == {}
    assert record_store(settings).load() == {}


def test_records_hold_fingerprints_never_values(
    settings: Settings, root_client: hvac.Client, root_reader: VaultReader, prefix: str
) -> None:
    value = "sk-live-very-secret-0001"
    put_secret(root_client, f"{prefix}/a", {"K": value})
    make_sync(settings, mapping_for({"a": (f"{prefix}/a", ["K"])}), root_reader).run(now=T0)

    outside_the_store = [
        path
        for path in settings.data_dir.rglob("*")
        if path.is_file() and settings.secrets_dir not in path.parents
    ]
    assert any(p.name.startswith("evalbot.db") for p in outside_the_store)
    for path in outside_the_store:  # the database (and its WAL), the fingerprint key
        assert value.encode() not in path.read_bytes(), path
    assert record_store(settings).load()["a"].key_fingerprints["K"].count(":") == 1
