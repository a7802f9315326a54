"""Least privilege and login, against a real OpenBao: the policy file in infra/ lets the sync read
exactly the mapped paths (and nothing else), and the sync logs in by token, AppRole or JWT —
including a JWT fetched the way GitHub Actions hands out OIDC tokens."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import hvac
import hvac.exceptions
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from infra.secrets.mapping import POLICY_NAME, load_mapping
from infra.secrets.secret_errors import VaultAuthError, VaultConfigError, VaultPermissionDenied
from infra.secrets.secret_service import sync_secrets
from infra.secrets.vault import login
from tests.infra.secrets.conftest import put_secret
from tests.support.openbao import OpenBaoServer
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[3]
MAPPING = REPO_ROOT / "infra" / "secrets.toml"
POLICY = REPO_ROOT / "infra" / "vault-policy.hcl"
ISSUER = "https://token.actions.githubusercontent.com"
AUDIENCE = "evalbot-vault-test"
NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def mapped_vault(openbao: OpenBaoServer) -> OpenBaoServer:
    """The shared server holding a value for every mapped path, an unmapped neighbour, and the
    policy from infra/vault-policy.hcl."""
    client = openbao.client()
    for group in load_mapping(MAPPING).groups:
        put_secret(client, group.path, {k: f"{group.name}-{k}-value" for k in group.keys})
    put_secret(client, "evalbot/unmapped", {"DB_PASSWORD": "not-for-the-sync"})
    client.sys.create_or_update_acl_policy(name=POLICY_NAME, policy=POLICY.read_text())
    return openbao


def policy_token(server: OpenBaoServer) -> str:
    created = server.client().auth.token.create(policies=[POLICY_NAME], no_default_policy=True)
    token: str = created["auth"]["client_token"]
    return token


def base_settings(tmp_path: Path, server: OpenBaoServer, **secrets: Any) -> Settings:
    """Settings for this Vault; `secrets` are more fields of the secrets group (vault_token=...)."""
    return Settings(
        data_dir=tmp_path / "evalbot",
        secrets={
            "vault_addr": server.url,
            "vault_timeout_s": 5,
            "mapping_path": MAPPING,
            **secrets,
        },
    )


def assert_synced_every_group(settings: Settings) -> None:
    mapping = load_mapping(MAPPING)
    expected = {g.name: {k: f"{g.name}-{k}-value" for k in g.keys} for g in mapping.groups}
    assert LocalSecretStore.from_settings(settings).read_all() == expected


def test_the_policy_file_grants_reading_the_mapped_paths(
    tmp_path: Path, mapped_vault: OpenBaoServer
) -> None:
    settings = base_settings(tmp_path, mapped_vault, vault_token=policy_token(mapped_vault))

    changes = sync_secrets(settings, {}, now=NOW)

    assert sorted(c.group for c in changes) == ["llm-keys", "search-api"]
    assert_synced_every_group(settings)


def test_the_policy_file_denies_everything_else(
    tmp_path: Path, mapped_vault: OpenBaoServer
) -> None:
    token = policy_token(mapped_vault)
    reader = login(base_settings(tmp_path, mapped_vault, vault_token=token), {})
    client = mapped_vault.client(token)

    with pytest.raises(VaultPermissionDenied, match="Vault denied secret/evalbot/unmapped"):
        reader.read("secret", "evalbot/unmapped")
    denied_calls = [
        lambda: client.secrets.kv.v2.create_or_update_secret(path="evalbot/llm-keys", secret={}),
        lambda: client.secrets.kv.v2.read_secret_metadata(path="evalbot/llm-keys"),
        lambda: client.secrets.kv.v2.list_secrets(path="evalbot"),
        lambda: client.secrets.kv.v2.delete_latest_version_of_secret(path="evalbot/llm-keys"),
        lambda: client.sys.list_acl_policies(),
    ]
    for call in denied_calls:
        with pytest.raises(hvac.exceptions.Forbidden):
            call()


def test_a_token_without_the_policy_fails_loudly(
    tmp_path: Path, mapped_vault: OpenBaoServer
) -> None:
    token = mapped_vault.client().auth.token.create(policies=["default"])["auth"]["client_token"]
    settings = base_settings(tmp_path, mapped_vault, vault_token=token)

    with pytest.raises(VaultPermissionDenied, match="does the policy grant read on it"):
        sync_secrets(settings, {}, now=NOW)
    assert LocalSecretStore.from_settings(settings).read_all() == {}


def test_approle_login_syncs_with_the_policy(tmp_path: Path, mapped_vault: OpenBaoServer) -> None:
    root = mapped_vault.client()
    mount = f"approle-{uuid.uuid4().hex[:8]}"
    root.sys.enable_auth_method("approle", path=mount)
    root.auth.approle.create_or_update_approle(
        "evalbot-sync", token_policies=[POLICY_NAME], mount_point=mount
    )
    role_id = root.auth.approle.read_role_id("evalbot-sync", mount_point=mount)["data"]["role_id"]
    secret_id = root.auth.approle.generate_secret_id("evalbot-sync", mount_point=mount)["data"][
        "secret_id"
    ]
    settings = base_settings(
        tmp_path,
        mapped_vault,
        vault_auth_method="approle",
        vault_auth_mount=mount,
        vault_role_id=role_id,
        vault_secret_id=secret_id,
    )

    sync_secrets(settings, {}, now=NOW)

    assert_synced_every_group(settings)
    wrong = settings.with_changes(secrets={"vault_role_id": "not-a-role"})
    with pytest.raises(VaultAuthError, match=f"approle login at auth/{mount} failed"):
        login(wrong, {})


class JwtIssuer:
    """A locally generated RSA key standing in for GitHub's OIDC issuer."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    @property
    def public_pem(self) -> str:
        return (
            self._key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def token(self, repository: str = "acme/agents", audience: str = AUDIENCE) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": audience,
            "sub": f"repo:{repository}:ref:refs/heads/main",
            "repository": repository,
            "ref": "refs/heads/main",
            "iat": now,
            "nbf": now - 5,
            "exp": now + 300,
        }
        return jwt.encode(claims, self._key, algorithm="RS256")


@pytest.fixture(scope="module")
def jwt_mount(mapped_vault: OpenBaoServer) -> tuple[str, JwtIssuer]:
    """A jwt auth mount trusting a test key, with a role bound to one repository's main branch."""
    issuer, root = JwtIssuer(), mapped_vault.client()
    mount = f"jwt-{uuid.uuid4().hex[:8]}"
    root.sys.enable_auth_method("jwt", path=mount)
    root.auth.jwt.configure(
        jwt_validation_pubkeys=[issuer.public_pem], bound_issuer=ISSUER, path=mount
    )
    root.auth.jwt.create_role(
        name="evalbot-sync",
        user_claim="sub",
        allowed_redirect_uris=[],
        role_type="jwt",
        bound_audiences=[AUDIENCE],
        bound_claims={"repository": "acme/agents", "ref": "refs/heads/main"},
        token_policies=[POLICY_NAME],
        token_ttl="10m",
        path=mount,
    )
    return mount, issuer


def jwt_settings(tmp_path: Path, server: OpenBaoServer, mount: str, **fields: Any) -> Settings:
    return base_settings(
        tmp_path,
        server,
        vault_auth_method="jwt",
        vault_auth_mount=mount,
        vault_role="evalbot-sync",
        **fields,
    )


def test_jwt_login_with_a_test_signed_token_syncs(
    tmp_path: Path, mapped_vault: OpenBaoServer, jwt_mount: tuple[str, JwtIssuer]
) -> None:
    mount, issuer = jwt_mount
    settings = jwt_settings(tmp_path, mapped_vault, mount, vault_jwt=issuer.token())

    sync_secrets(settings, {}, now=NOW)

    assert_synced_every_group(settings)


def test_jwt_login_rejects_a_token_for_another_repository(
    tmp_path: Path, mapped_vault: OpenBaoServer, jwt_mount: tuple[str, JwtIssuer]
) -> None:
    mount, issuer = jwt_mount
    forged = issuer.token(repository="evil/fork")
    settings = jwt_settings(tmp_path, mapped_vault, mount, vault_jwt=forged)

    with pytest.raises(VaultAuthError, match=f"jwt login at auth/{mount} failed") as raised:
        login(settings, {})
    assert forged not in str(raised.value)


def test_jwt_login_rejects_a_token_signed_by_another_key(
    tmp_path: Path, mapped_vault: OpenBaoServer, jwt_mount: tuple[str, JwtIssuer]
) -> None:
    mount, _ = jwt_mount
    settings = jwt_settings(tmp_path, mapped_vault, mount, vault_jwt=JwtIssuer().token())

    with pytest.raises(VaultAuthError):
        login(settings, {})


class ActionsTokenEndpoint:
    """Stands in for the GitHub Actions OIDC endpoint: checks the bearer, returns a JWT for the
    requested audience."""

    bearer = "actions-runtime-bearer-123"

    def __init__(self, issuer: JwtIssuer) -> None:
        self.issuer, self.audiences = issuer, []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization") != f"bearer {endpoint.bearer}":
                    self.send_response(401)
                    self.end_headers()
                    return
                audience = parse_qs(urlsplit(self.path).query).get("audience", [""])[0]
                endpoint.audiences.append(audience)
                body = json.dumps({"value": endpoint.issuer.token(audience=audience)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)

    @property
    def environ(self) -> dict[str, str]:
        url = f"http://127.0.0.1:{self.server.server_port}/token?api-version=2.0"
        return {
            "ACTIONS_ID_TOKEN_REQUEST_URL": url,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.bearer,
        }

    def __enter__(self) -> ActionsTokenEndpoint:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def actions_endpoint(jwt_mount: tuple[str, JwtIssuer]) -> Iterator[ActionsTokenEndpoint]:
    with ActionsTokenEndpoint(jwt_mount[1]) as endpoint:
        yield endpoint


def test_jwt_login_fetches_the_github_actions_oidc_token(
    tmp_path: Path,
    mapped_vault: OpenBaoServer,
    jwt_mount: tuple[str, JwtIssuer],
    actions_endpoint: ActionsTokenEndpoint,
) -> None:
    settings = jwt_settings(tmp_path, mapped_vault, jwt_mount[0], vault_jwt_audience=AUDIENCE)

    sync_secrets(settings, actions_endpoint.environ, now=NOW)

    assert actions_endpoint.audiences == [AUDIENCE]
    assert_synced_every_group(settings)


def test_jwt_login_outside_actions_without_a_token_says_what_is_missing(
    tmp_path: Path, mapped_vault: OpenBaoServer, jwt_mount: tuple[str, JwtIssuer]
) -> None:
    settings = jwt_settings(tmp_path, mapped_vault, jwt_mount[0])

    with pytest.raises(VaultConfigError, match="id-token: write"):
        login(settings, {})
