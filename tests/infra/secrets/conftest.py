"""Helpers for the secret-sync tests: unique Vault paths on the shared OpenBao server, mappings
pointing at them, and settings that log in with the root token."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import hvac
import pytest

from infra.secrets.fingerprint import Fingerprinter
from infra.secrets.mapping import SecretMapping, parse_mapping
from infra.secrets.secret_service import record_store
from infra.secrets.sink import LocalSecretSink
from infra.secrets.sync import SecretSync
from infra.secrets.vault import VaultReader
from tests.support.openbao import OpenBaoServer
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings


def put_secret(client: hvac.Client, path: str, data: Mapping[str, str]) -> int:
    """Write a new version at secret/<path>; returns the version number."""
    response = client.secrets.kv.v2.create_or_update_secret(
        path=path, secret=dict(data), mount_point="secret"
    )
    return int(response["data"]["version"])


def mapping_for(groups: Mapping[str, tuple[str, list[str]]]) -> SecretMapping:
    """groups: name -> (path, keys)."""
    data = {"groups": {name: {"path": p, "keys": keys} for name, (p, keys) in groups.items()}}
    return parse_mapping(data, "test mapping")


def make_sync(
    settings: Settings, mapping: SecretMapping, reader: object, fingerprint_key: bytes = b"k" * 32
) -> SecretSync:
    return SecretSync(
        mapping=mapping,
        reader=reader,  # type: ignore[arg-type]
        sink=LocalSecretSink(LocalSecretStore.from_settings(settings)),
        records=record_store(settings),  # the secret_syncs table, SQLite in data_dir
        fingerprinter=Fingerprinter(fingerprint_key),
    )


@pytest.fixture
def prefix() -> str:
    """A Vault path prefix of this test's own on the shared server."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def root_client(openbao: OpenBaoServer) -> hvac.Client:
    return openbao.client()


@pytest.fixture
def root_reader(openbao: OpenBaoServer) -> VaultReader:
    return VaultReader(openbao.client())


@pytest.fixture
def vault_settings(tmp_path: Path, openbao: OpenBaoServer) -> Settings:
    return Settings(
        data_dir=tmp_path / "evalbot",
        secrets={"vault_addr": openbao.url, "vault_token": "root", "vault_timeout_s": 5},
    )
