"""The judge reports each verdict it asks for to the worker's metrics (`evalbot_judge_calls_total`):
a malformed reply, the good one after it, an answer from the cache, and a judge that is down —
against the local OpenAI-compatible server over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.fakes.openai_server import FakeOpenAI, Reply
from workflows.engine.telemetry import EngineMetrics
from workflows.scoring import JudgeRequest, JudgeUnavailable
from workflows.scoring.llm_judge import JudgeConfig, LlmJudge

KEY = "sk-test-metrics-0123456789"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY).start()
    yield fake
    fake.stop()


def request(answer: str) -> JudgeRequest:
    return JudgeRequest(case_id="c", criterion="accuracy", question="Right?", task="T",
                        answer=answer)  # fmt: skip


def test_judge_calls_are_counted_by_outcome(server: FakeOpenAI, tmp_path: Path) -> None:
    metrics = EngineMetrics()
    config = JudgeConfig(base_url=server.base_url, model="m", api_key=SecretStr(KEY),
                         rate_per_s=0.0, backoff_base_s=0.01, max_attempts=1,
                         cache_dir=tmp_path / "cache")  # fmt: skip
    judge = LlmJudge(config, on_call=metrics.judge_call)
    server.enqueue(Reply(content="no verdict here"))  # then the server's default: a good one
    judge.judge(request("PASS"))
    judge.judge(request("PASS"))  # the same question: from the cache, no request
    server.enqueue(Reply(status=503))
    with pytest.raises(JudgeUnavailable):
        judge.judge(request("another answer"))
    judge.close()
    count = metrics.registry.get_sample_value
    calls = {o: count("evalbot_judge_calls_total", {"outcome": o})
             for o in ("malformed", "ok", "cached", "unavailable")}  # fmt: skip
    assert calls == {"malformed": 1, "ok": 1, "cached": 1, "unavailable": 1}
    assert server.calls == 3
