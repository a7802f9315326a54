"""LlmJudge against a local OpenAI-compatible server over real HTTP (tests/fakes/openai_server)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.fakes.openai_server import FakeOpenAI, Reply
from workflows.scoring import JudgeRequest, JudgeUnavailable
from workflows.scoring.llm_judge import JudgeConfig, LlmJudge

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY).start()
    yield fake
    fake.stop()


class Sleeps:
    """Records the waits the client asks for instead of sleeping them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make_judge(server: FakeOpenAI, tmp_path: Path, **overrides: Any) -> LlmJudge:
    options: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "judge-model-1",
        "api_key": SecretStr(KEY),
        "timeout_s": 2.0,
        "backoff_base_s": 0.01,
        "rate_per_s": 0.0,
        "cache_dir": tmp_path / "judge-cache",
        "input_usd_per_mtok": 1.0,
        "output_usd_per_mtok": 4.0,
        **overrides,
    }
    return LlmJudge(JudgeConfig(**options))


def ask(answer: str = "PASS: both contracts named.", **fields: Any) -> JudgeRequest:
    return JudgeRequest(
        case_id=fields.pop("case_id", "case-1"),
        criterion=fields.pop("criterion", "accuracy"),
        question=fields.pop("question", "Does it name both contracts?"),
        task="Which contracts need consent?",
        answer=answer,
        **fields,
    )


def test_good_verdicts_are_scored_with_tokens_and_cost(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(server, tmp_path)
    good = judge.judge(ask("PASS"))
    bad = judge.judge(ask("I could not find anything."))
    assert (good.score, good.rationale) == (1.0, "The answer meets the criterion.")
    assert bad.score == 0.0
    assert good.record is not None
    assert (good.record.calls, good.record.input_tokens, good.record.output_tokens) == (1, 120, 30)
    assert good.record.cost_usd == pytest.approx((120 * 1.0 + 30 * 4.0) / 1e6)
    assert good.record.model == "judge-model-1" and len(good.record.prompt_version) == 12
    request = server.requests[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "judge-model-1"
    assert request.body["temperature"] == 0.0
    assert request.body["response_format"] == {"type": "json_object"}
    roles = [m["role"] for m in request.body["messages"]]
    assert roles == ["system", "user"]


def test_malformed_reply_is_asked_again(server: FakeOpenAI, tmp_path: Path) -> None:
    server.enqueue(
        Reply(content="Sure! The score is high."),
        Reply(content='```json\n{"score": 0.7, "rationale": "Mostly right."}\n```'),
    )
    verdict = make_judge(server, tmp_path).judge(ask())
    assert (verdict.score, verdict.rationale) == (0.7, "Mostly right.")
    assert verdict.record is not None
    assert (verdict.record.calls, verdict.record.input_tokens) == (2, 240)
    assert server.calls == 2


@pytest.mark.parametrize(
    "content",
    [
        "not json at all",
        '{"score": 1.5, "rationale": "too high"}',
        '{"score": true, "rationale": "a boolean"}',
        '{"score": 0.5}',
        '[0.5, "a list"]',
    ],
)
def test_malformed_replies_become_judge_unavailable_never_a_zero(
    server: FakeOpenAI, tmp_path: Path, content: str
) -> None:
    server.enqueue(*[Reply(content=content)] * 3)
    judge = make_judge(server, tmp_path, malformed_attempts=3)
    with pytest.raises(JudgeUnavailable, match="not a valid verdict 3 times"):
        judge.judge(ask())
    assert server.calls == 3
    judge.judge(ask())  # nothing was cached: the next attempt asks the (now sane) server again
    assert server.calls == 4


def test_timeouts_are_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    server.enqueue(Reply(delay_s=1.0))
    sleeps = Sleeps()
    verdict = make_judge(server, tmp_path, timeout_s=0.3, sleep=sleeps).judge(ask())
    assert verdict.score == 1.0
    assert server.calls == 2 and len(sleeps.waits) == 1


def test_a_judge_that_never_answers_in_time_is_unavailable(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(*[Reply(delay_s=0.6)] * 3)
    judge = make_judge(server, tmp_path, timeout_s=0.2, max_attempts=3, sleep=Sleeps())
    with pytest.raises(JudgeUnavailable, match=r"failed 3 times: no answer within 0.2 s"):
        judge.judge(ask())


def test_429_waits_as_long_as_retry_after_says(server: FakeOpenAI, tmp_path: Path) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    server.enqueue(
        Reply(status=429, headers={"Retry-After": "7"}),
        Reply(status=429, headers={"retry-after-ms": "250"}),
        Reply(status=429, headers={"Retry-After": later}),
        Reply(status=503),
    )
    sleeps = Sleeps()
    verdict = make_judge(server, tmp_path, sleep=sleeps, backoff_max_s=60).judge(ask())
    assert verdict.score == 1.0 and server.calls == 5
    assert sleeps.waits[:2] == [7.0, 0.25]
    assert 25 <= sleeps.waits[2] <= 30
    assert 0.01 * 2**3 * 0.5 <= sleeps.waits[3] <= 0.01 * 2**3  # backoff with jitter, attempt 4


def test_retry_after_is_capped(server: FakeOpenAI, tmp_path: Path) -> None:
    server.enqueue(Reply(status=429, headers={"Retry-After": "3600"}))
    sleeps = Sleeps()
    make_judge(server, tmp_path, sleep=sleeps, backoff_max_s=20).judge(ask())
    assert sleeps.waits == [20]


def test_rate_limited_until_attempts_run_out(server: FakeOpenAI, tmp_path: Path) -> None:
    server.enqueue(*[Reply(status=429, headers={"Retry-After": "1"})] * 4)
    judge = make_judge(server, tmp_path, sleep=Sleeps(), max_attempts=4)
    with pytest.raises(JudgeUnavailable, match=r"failed 4 times: HTTP 429"):
        judge.judge(ask())


def test_client_errors_are_not_retried_and_never_show_the_key(
    server: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    wrong = "sk-wrong-key-9876543210"
    judge = make_judge(server, tmp_path, api_key=SecretStr(wrong))
    with pytest.raises(JudgeUnavailable, match="refused the request \\(HTTP 401") as raised:
        judge.judge(ask())
    assert server.calls == 1
    assert wrong not in str(raised.value) and wrong not in repr(judge.config)
    assert wrong not in caplog.text


def test_server_messages_quoting_the_key_are_scrubbed(server: FakeOpenAI, tmp_path: Path) -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}."}})
    server.enqueue(Reply(status=403, body=body))
    with pytest.raises(JudgeUnavailable) as raised:
        make_judge(server, tmp_path).judge(ask())
    assert KEY not in str(raised.value) and "[redacted]" in str(raised.value)


def test_the_cache_makes_a_second_run_free(server: FakeOpenAI, tmp_path: Path) -> None:
    requests = [ask(f"answer {i} PASS" if i % 2 else f"answer {i}") for i in range(6)]
    first = [make_judge(server, tmp_path).judge(r) for r in requests]
    assert server.calls == 6
    again = make_judge(server, tmp_path)  # a new process, the same cache folder
    second = [again.judge(r) for r in requests]
    assert server.calls == 6  # no new calls
    assert [(v.score, v.rationale) for v in second] == [(v.score, v.rationale) for v in first]
    assert all(v.record is not None and v.record.calls == 0 for v in second)
    assert all(v.record is not None and v.record.cost_usd == 0 for v in second)
    cached = "".join(p.read_text() for p in (tmp_path / "judge-cache").rglob("*.json"))
    assert KEY not in cached


@pytest.mark.parametrize(
    "change",
    [
        {"model": "judge-model-2"},
        {"temperature": 0.3},
    ],
)
def test_the_cache_is_keyed_by_model_and_settings(
    server: FakeOpenAI, tmp_path: Path, change: dict[str, Any]
) -> None:
    make_judge(server, tmp_path).judge(ask())
    make_judge(server, tmp_path, **change).judge(ask())
    assert server.calls == 2


def test_the_cache_is_keyed_by_prompt_version_and_inputs(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    make_judge(server, tmp_path).judge(ask())
    edited = make_judge(server, tmp_path)
    edited.prompt_version = "0123456789ab"  # as if the template had been edited
    edited.judge(ask())
    make_judge(server, tmp_path).judge(ask(reference="The reference answer."))
    make_judge(server, tmp_path).judge(ask(question="Is it short?"))
    assert server.calls == 4


def test_judge_samples_record_agreement(server: FakeOpenAI, tmp_path: Path) -> None:
    scores = iter([0.9, 0.8, 0.1])
    server.verdict = lambda user: (next(scores), "Reason.")
    verdict = make_judge(server, tmp_path).judge(ask(samples=3))
    assert verdict.score == pytest.approx(0.6)
    assert verdict.record is not None
    assert verdict.record.sample_scores == (0.9, 0.8, 0.1)
    assert verdict.record.agreement == pytest.approx(2 / 3)
    assert verdict.rationale == "2/3 samples agree (0.90, 0.80, 0.10): Reason."
    assert (verdict.record.samples, verdict.record.calls) == (3, 3)
    again = make_judge(server, tmp_path).judge(ask(samples=3))
    assert (again.score, server.calls) == (verdict.score, 3)


def test_concurrency_is_bounded_across_threads(server: FakeOpenAI, tmp_path: Path) -> None:
    server.enqueue(*[Reply(delay_s=0.15)] * 8)
    judge = make_judge(server, tmp_path, concurrency=2, cache_dir=None)
    threads = [threading.Thread(target=judge.judge, args=(ask(f"answer {i}"),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.calls == 8
    assert server.max_in_flight == 2


def test_rate_limit_spaces_requests_across_threads(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(server, tmp_path, rate_per_s=20.0, burst=1, concurrency=8, cache_dir=None)
    started = time.monotonic()
    threads = [threading.Thread(target=judge.judge, args=(ask(f"answer {i}"),)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert server.calls == 10
    assert time.monotonic() - started >= 9 / 20 - 0.02
