"""Keyed fingerprints of secret values, so a sync notices a change without storing any value.

HMAC-SHA256 under a service key: `settings.secrets.fingerprint_key` when set (keep it stable where
the data directory is not, e.g. CI), otherwise 32 random bytes created once in
`data_dir/secret-fingerprint.key` (mode 0600). Fingerprints start with the key's id, so records made
under another key simply read as "changed" and are rewritten.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from workflows.settings import Settings

KEY_FILE = "secret-fingerprint.key"
KEY_BYTES = 32


class Fingerprinter:
    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the fingerprint key must be at least 16 bytes")
        self._key = key
        self.key_id = self._mac(b"evalbot fingerprint key id")[:8]

    @classmethod
    def from_settings(cls, settings: Settings) -> Fingerprinter:
        if settings.secrets.fingerprint_key is not None:
            return cls(settings.secrets.fingerprint_key.get_secret_value().encode())
        return cls(load_or_create_key(settings.data_dir / KEY_FILE))

    def _mac(self, message: bytes) -> str:
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def value(self, group: str, key: str, value: str) -> str:
        """The fingerprint of one key's value within one group."""
        message = "\0".join((group, key, value)).encode()
        return f"{self.key_id}:{self._mac(message)[:32]}"

    def values(self, group: str, values: Mapping[str, str]) -> dict[str, str]:
        return {key: self.value(group, key, values[key]) for key in sorted(values)}

    def group(self, key_fingerprints: Mapping[str, str]) -> str:
        """The fingerprint of a whole group, from its keys' fingerprints."""
        joined = "\n".join(f"{k}={key_fingerprints[k]}" for k in sorted(key_fingerprints))
        return f"{self.key_id}:{self._mac(joined.encode())[:32]}"


def load_or_create_key(path: Path) -> bytes:
    """The key in `path`, created (0600, exclusively, so concurrent first runs agree) if absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_key(path)
    with os.fdopen(fd, "wb") as handle:
        handle.write(secrets.token_bytes(KEY_BYTES))
        handle.flush()
        os.fsync(handle.fileno())
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = path.read_bytes()
    if len(key) < KEY_BYTES:
        raise ValueError(f"fingerprint key {path} is truncated; delete it to make a new one")
    return key
