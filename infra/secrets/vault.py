"""Log in to Vault (token, AppRole or JWT) and read KV v2 secrets, turning every failure into a
one-sentence `SecretsError`: unreachable, sealed, login failed, permission denied, not found."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import hvac
import hvac.exceptions as vault_errors

from infra.secrets.oidc import github_actions_token
from infra.secrets.secret_errors import (
    SecretNotFound,
    SecretsError,
    VaultAuthError,
    VaultConfigError,
    VaultPermissionDenied,
    VaultSealed,
    VaultUnreachable,
)
from workflows.redaction import Redactor
from workflows.settings import Settings


@dataclass(frozen=True)
class VaultSecret:
    """One version of a KV v2 secret. `data` holds values: never log or print it."""

    path: str
    version: int
    created_time: datetime | None
    data: Mapping[str, str]

    def __repr__(self) -> str:  # keep values out of tracebacks and debug output
        return f"VaultSecret(path={self.path!r}, version={self.version}, keys={sorted(self.data)})"


class SecretReader(Protocol):
    """What the sync needs from Vault: the latest version of a KV v2 secret."""

    def read(self, mount: str, path: str) -> VaultSecret: ...


class VaultReader:
    """Reads KV v2 secrets with a logged-in hvac client."""

    def __init__(self, client: hvac.Client, redactor: Redactor | None = None) -> None:
        self.client = client
        self._redactor = redactor or Redactor([])

    def read(self, mount: str, path: str) -> VaultSecret:
        where = f"{mount}/{path}"
        with translate_errors(self.client.url, where, self._redactor):
            response = self.client.secrets.kv.v2.read_secret_version(
                path=path, mount_point=mount, raise_on_deleted_version=True
            )
        return _parse_secret(where, response)


def _parse_secret(where: str, response: Any) -> VaultSecret:
    try:
        body = response["data"]
        data, metadata = body["data"], body["metadata"]
        version = int(metadata["version"])
    except (KeyError, TypeError, ValueError):
        raise SecretNotFound(f"Vault returned no KV v2 secret at {where}") from None
    values = {str(k): v if isinstance(v, str) else str(v) for k, v in (data or {}).items()}
    return VaultSecret(where, version, _parse_time(metadata.get("created_time")), values)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    # Vault writes nanoseconds ("2024-05-01T10:00:00.123456789Z"); Python parses microseconds.
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(trimmed)
    except ValueError:
        return None


@contextmanager
def translate_errors(address: str, where: str, redactor: Redactor) -> Iterator[None]:
    """Turn hvac and network errors into one-sentence SecretsErrors naming `where`."""
    try:
        yield
    except vault_errors.VaultDown:
        raise VaultSealed(
            f"Vault at {address} is sealed or unavailable (reading {where})"
        ) from None
    except vault_errors.Forbidden as error:
        raise VaultPermissionDenied(
            f"Vault denied {where}: {_reason(error, redactor)} (does the policy grant read on it?)"
        ) from None
    except vault_errors.InvalidPath:
        raise SecretNotFound(
            f"no secret at {where} in Vault (or its latest version is deleted)"
        ) from None
    except vault_errors.Unauthorized as error:
        raise VaultAuthError(
            f"Vault rejected the token for {where}: {_reason(error, redactor)}"
        ) from None
    except vault_errors.VaultError as error:
        raise SecretsError(f"Vault error for {where}: {_reason(error, redactor)}") from None
    except OSError as error:  # requests' ConnectionError and Timeout are OSErrors
        raise VaultUnreachable(
            f"Vault at {address} is unreachable ({type(error).__name__}) while reading {where}"
        ) from None


def _reason(error: Exception, redactor: Redactor) -> str:
    """The first line of Vault's own message, scrubbed, without the URL hvac appends."""
    text = str(error).split(", on ")[0].splitlines()[0] if str(error) else type(error).__name__
    return redactor.redact(text.strip()) or type(error).__name__


def login(settings: Settings, environ: Mapping[str, str]) -> VaultReader:
    """A reader logged in with the configured method; `environ` supplies the GitHub Actions OIDC
    request variables when jwt login has no explicit token."""
    if not settings.secrets.vault_addr:
        raise VaultConfigError("set EVALBOT_VAULT_ADDR to the Vault address")
    client = hvac.Client(
        url=settings.secrets.vault_addr,
        verify=settings.secrets.vault_ca_cert or True,
        timeout=settings.secrets.vault_timeout_s,
    )
    method = settings.secrets.vault_auth_method
    credentials = _LOGINS[method](client, settings, environ)
    redactor = Redactor(credentials)
    mount = settings.secrets.vault_auth_mount or method
    if method != "token":
        with _login_errors(settings.secrets.vault_addr, method, mount, redactor):
            _perform_login(client, method, settings, credentials, mount)
    return VaultReader(client, redactor)


def _token_credentials(
    client: hvac.Client, settings: Settings, environ: Mapping[str, str]
) -> list[str]:
    if settings.secrets.vault_token is None:
        raise VaultConfigError("auth method token needs EVALBOT_VAULT_TOKEN")
    client.token = settings.secrets.vault_token.get_secret_value()
    return [client.token]


def _approle_credentials(
    client: hvac.Client, settings: Settings, environ: Mapping[str, str]
) -> list[str]:
    if not settings.secrets.vault_role_id or settings.secrets.vault_secret_id is None:
        raise VaultConfigError(
            "auth method approle needs EVALBOT_VAULT_ROLE_ID and EVALBOT_VAULT_SECRET_ID"
        )
    return [settings.secrets.vault_secret_id.get_secret_value()]


def _jwt_credentials(
    client: hvac.Client, settings: Settings, environ: Mapping[str, str]
) -> list[str]:
    if not settings.secrets.vault_role:
        raise VaultConfigError("auth method jwt needs EVALBOT_VAULT_ROLE")
    if settings.secrets.vault_jwt is not None:
        return [settings.secrets.vault_jwt.get_secret_value()]
    return [
        github_actions_token(
            environ, settings.secrets.vault_jwt_audience, settings.secrets.vault_timeout_s
        )
    ]


_LOGINS: dict[str, Callable[[hvac.Client, Settings, Mapping[str, str]], list[str]]] = {
    "token": _token_credentials,
    "approle": _approle_credentials,
    "jwt": _jwt_credentials,
}


def _perform_login(
    client: hvac.Client, method: str, settings: Settings, credentials: list[str], mount: str
) -> None:
    if method == "approle":
        client.auth.approle.login(
            role_id=settings.secrets.vault_role_id, secret_id=credentials[0], mount_point=mount
        )
    else:
        client.auth.jwt.jwt_login(role=settings.secrets.vault_role, jwt=credentials[0], path=mount)


@contextmanager
def _login_errors(address: str, method: str, mount: str, redactor: Redactor) -> Iterator[None]:
    try:
        yield
    except vault_errors.VaultDown:
        raise VaultSealed(f"Vault at {address} is sealed or unavailable (logging in)") from None
    except vault_errors.VaultError as error:
        raise VaultAuthError(
            f"Vault {method} login at auth/{mount} failed: {_reason(error, redactor)}"
        ) from None
    except OSError as error:
        raise VaultUnreachable(
            f"Vault at {address} is unreachable ({type(error).__name__}) while logging in"
        ) from None
