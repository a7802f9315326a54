"""`X-Hub-Signature-256`: HMAC-SHA256 of the raw body with the webhook secret, compared in
constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The header value GitHub would send for `body`."""
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """True only for a well-formed header that matches; compared with `hmac.compare_digest`."""
    if not header:
        return False
    expected = sign(secret, body).encode()
    return hmac.compare_digest(expected, header.strip().encode("utf-8", "replace"))
