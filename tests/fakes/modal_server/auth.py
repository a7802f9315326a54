"""Credentials of the Modal test server: the token pair, and the JWTs it issues.

The SDK sends `x-modal-token-id` / `x-modal-token-secret` on every control-plane call; V2 sandbox
calls also carry `x-modal-auth-token` (a JWT from `AuthTokenGet`), and the task command router gets
`authorization: Bearer <jwt>` (from `SandboxCreateV2` / `SandboxGetCommandRouterAccess`). The SDK
decodes the JWTs' `exp` claim, so they are real HS256 JWTs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from grpclib import GRPCError, Status

TOKEN_ID = "ak-modaltestserver0000000"
TOKEN_SECRET = "as-modaltestserversecret00000000"
# What the SDK shows for a rejected token (modal.exception.AuthError carries this text).
BAD_TOKEN_MESSAGE = (
    "Token validation failed: the token id or secret is invalid. "
    "Run `modal token new` to create a new token."
)
TOKEN_LIFETIME_S = 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Issuer:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def issue(self, **claims: Any) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps({**claims, "exp": int(time.time()) + TOKEN_LIFETIME_S}).encode())
        signature = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{_b64(signature)}"

    def claims(self, token: str) -> dict[str, Any] | None:
        """The token's claims if we signed it and it has not expired."""
        try:
            header, payload, signature = token.split(".")
            expected = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(expected, _unb64(signature)):
                return None
            claims = dict(json.loads(_unb64(payload)))
        except ValueError:
            return None
        return claims if claims.get("exp", 0) > time.time() else None


def check_token(metadata: Mapping[str, Any]) -> None:
    token_id, secret = metadata.get("x-modal-token-id"), metadata.get("x-modal-token-secret")
    if token_id is None and secret is None:
        raise GRPCError(Status.UNAUTHENTICATED, "Token missing. Could not authenticate client.")
    if token_id != TOKEN_ID or secret != TOKEN_SECRET:
        raise GRPCError(Status.UNAUTHENTICATED, BAD_TOKEN_MESSAGE)


def check_auth_token(issuer: Issuer, metadata: Mapping[str, Any]) -> None:
    """V2 sandbox calls need the input-plane JWT from AuthTokenGet."""
    token = metadata.get("x-modal-auth-token")
    if not token or issuer.claims(str(token)) is None:
        raise GRPCError(Status.UNAUTHENTICATED, "Missing or invalid x-modal-auth-token")


def check_bearer(issuer: Issuer, metadata: Mapping[str, Any], task_id: str) -> None:
    """Router calls need the task's JWT (`authorization: Bearer ...`)."""
    header = str(metadata.get("authorization") or "")
    scheme, _, token = header.partition(" ")
    claims = issuer.claims(token) if scheme == "Bearer" else None
    if claims is None or claims.get("task_id") != task_id:
        raise GRPCError(Status.UNAUTHENTICATED, "Invalid or expired command router token")
