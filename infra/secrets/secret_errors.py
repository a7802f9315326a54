"""Everything that can go wrong in a secret sync, each `str()` one sentence that names the group,
path or setting at fault and never a secret value. The CLI prints it and exits non-zero."""

from __future__ import annotations


class SecretsError(Exception):
    """Base class of every secret-sync failure."""


class MappingError(SecretsError):
    """The mapping file (infra/secrets.toml) is missing or invalid."""


class VaultConfigError(SecretsError):
    """The Vault settings are incomplete (no address, no token, no role...)."""


class VaultUnreachable(SecretsError):
    """Vault did not answer (connection refused, DNS, TLS, timeout)."""


class VaultSealed(SecretsError):
    """Vault answered that it is sealed or unavailable."""


class VaultAuthError(SecretsError):
    """Login to Vault failed (bad token, AppRole or JWT)."""


class VaultPermissionDenied(SecretsError):
    """The token may not read a mapped path: the policy and the mapping disagree."""


class SecretNotFound(SecretsError):
    """A mapped path does not exist in Vault (or its latest version is deleted)."""


class MissingKey(SecretsError):
    """A mapped secret lacks a key the mapping's allowlist names."""


class SinkError(SecretsError):
    """The provider's secret store could not be written; what it held before is untouched."""
