"""Keyed fingerprints: stable under one key, different under another, never the value."""

from __future__ import annotations

import stat
from pathlib import Path

from infra.secrets.fingerprint import KEY_FILE, Fingerprinter
from workflows.settings import Settings


def test_the_service_key_is_created_once_private_and_reused(settings: Settings) -> None:
    first = Fingerprinter.from_settings(settings)
    second = Fingerprinter.from_settings(settings)

    key_file: Path = settings.data_dir / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert first.value("g", "K", "value-1234") == second.value("g", "K", "value-1234")


def test_fingerprints_change_with_the_value_the_key_name_the_group_and_the_key() -> None:
    fp = Fingerprinter(b"a" * 32)
    base = fp.value("g", "K", "value-1234")

    assert base != fp.value("g", "K", "value-1235")
    assert base != fp.value("g", "K2", "value-1234")
    assert base != fp.value("g2", "K", "value-1234")
    assert base != Fingerprinter(b"b" * 32).value("g", "K", "value-1234")
    assert "value-1234" not in base


def test_a_configured_key_overrides_the_data_dir_key(settings: Settings) -> None:
    configured = Settings(data_dir=settings.data_dir, secrets={"fingerprint_key": "x" * 32})

    fp = Fingerprinter.from_settings(configured)

    assert fp.value("g", "K", "v" * 8) == Fingerprinter(b"x" * 32).value("g", "K", "v" * 8)
    assert not (settings.data_dir / KEY_FILE).exists()
