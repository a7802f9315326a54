"""The judge built from Settings at the composition root: URL, model, key (env or secret store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.composition import build_judge
from tests.fakes.openai_server import FakeOpenAI
from workflows.scoring import JudgeRequest
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings

KEY = "sk-from-the-store-42"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY).start()
    yield fake
    fake.stop()


def ask() -> JudgeRequest:
    return JudgeRequest("c", "accuracy", "Right?", "Task.", "PASS")


def test_no_judge_url_means_no_judge(tmp_path: Path) -> None:
    assert build_judge(Settings(data_dir=tmp_path)) is None


def test_key_from_the_environment(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALBOT_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("EVALBOT_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("EVALBOT_JUDGE_MODEL", "judge-x")
    settings = Settings(data_dir=tmp_path)
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())
    judge = build_judge(settings)
    assert judge is not None
    try:
        assert judge.judge(ask()).score == 1.0
    finally:
        judge.close()
    assert server.requests[0].body["model"] == "judge-x"
    assert list((tmp_path / "judge-cache").rglob("*.json"))  # cached under the data dir


def test_key_from_the_secret_store(server: FakeOpenAI, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        judge={"base_url": server.base_url, "secret_group": "llm-keys", "rate_per_s": 0},
    )
    LocalSecretStore.from_settings(settings).replace({"llm-keys": {"OPENAI_API_KEY": KEY}})
    judge = build_judge(settings)
    assert judge is not None
    try:
        assert judge.judge(ask()).score == 1.0
    finally:
        judge.close()
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
