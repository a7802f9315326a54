"""Vault -> provider secret sync: the reviewed mapping, Vault login, the sync itself, the sinks it
writes to, its records and status. See docs/secrets.md."""

from infra.secrets.mapping import GroupMapping, SecretMapping, load_mapping, render_policy
from infra.secrets.secret_errors import (
    MappingError,
    MissingKey,
    SecretNotFound,
    SecretsError,
    SinkError,
    VaultAuthError,
    VaultConfigError,
    VaultPermissionDenied,
    VaultSealed,
    VaultUnreachable,
)
from infra.secrets.sink import LocalSecretSink, SecretSink
from infra.secrets.sinks import build_sink
from infra.secrets.sync import Action, GroupChange, SecretSync

__all__ = [
    "Action",
    "GroupChange",
    "GroupMapping",
    "LocalSecretSink",
    "MappingError",
    "MissingKey",
    "SecretMapping",
    "SecretNotFound",
    "SecretSink",
    "SecretSync",
    "SecretsError",
    "SinkError",
    "VaultAuthError",
    "VaultConfigError",
    "VaultPermissionDenied",
    "VaultSealed",
    "VaultUnreachable",
    "build_sink",
    "load_mapping",
    "render_policy",
]
