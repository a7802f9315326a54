"""The judge's parts on their own: verdict parsing, pacing, Retry-After, the prompt."""

from __future__ import annotations

import threading

import httpx
import pytest

from workflows.scoring import JudgeRequest
from workflows.scoring.llm_judge import MalformedVerdict, parse_verdict, render_messages
from workflows.scoring.llm_judge.chat_client import retry_after
from workflows.scoring.llm_judge.judge import agreement
from workflows.scoring.llm_judge.limiter import TokenBucket
from workflows.scoring.llm_judge.prompt import clip, prompt_version


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"score": 1, "rationale": "ok"}', (1.0, "ok")),
        ('  {"score": 0.25, "rationale": "partly\\n right", "extra": 1}  ', (0.25, "partly right")),
        ('```json\n{"score": 0, "rationale": "no"}\n```', (0.0, "no")),
        ('```\n{"score": "0.5", "rationale": "half"}\n```', (0.5, "half")),
    ],
)
def test_valid_verdicts(content: str, expected: tuple[float, str]) -> None:
    assert parse_verdict(content) == expected


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "not JSON"),
        ("The score is 1.", "not JSON"),
        ('Here: {"score": 1, "rationale": "x"}', "not JSON"),
        ("[1]", "expected a JSON object"),
        ('{"rationale": "x"}', "'score' is missing"),
        ('{"score": null, "rationale": "x"}', "'score' is missing"),
        ('{"score": false, "rationale": "x"}', "'score' is missing"),
        ('{"score": "high", "rationale": "x"}', "not a number"),
        ('{"score": -0.1, "rationale": "x"}', "outside"),
        ('{"score": 1.01, "rationale": "x"}', "outside"),
        ('{"score": NaN, "rationale": "x"}', "outside"),
        ('{"score": 1, "rationale": "  "}', "'rationale'"),
        ('{"score": 1, "rationale": 3}', "'rationale'"),
    ],
)
def test_malformed_verdicts(content: str, problem: str) -> None:
    with pytest.raises(MalformedVerdict, match=problem):
        parse_verdict(content)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_spaces_reservations_by_the_rate_after_a_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(4.0, burst=2, clock=clock)
    waits = [bucket.reserve() for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.0, 0.25, 0.5, 0.75])
    clock.now += 10  # idle long enough: the burst is available again
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.25])


def test_token_bucket_unlimited_never_waits() -> None:
    bucket = TokenBucket(0.0)
    assert {bucket.reserve() for _ in range(100)} == {0.0}


def test_token_bucket_hands_out_distinct_slots_across_threads() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, clock=clock)
    waits: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(50):
            wait = bucket.reserve()
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(waits) == pytest.approx([i / 10 for i in range(200)])


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "40"}, 0.04),
        ({"Retry-After": "-4"}, 0.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(httpx.Headers(headers)) == seconds


def request(**fields: object) -> JudgeRequest:
    defaults: dict[str, object] = {
        "case_id": "c",
        "criterion": "accuracy",
        "question": "Names both contracts?",
        "task": "Which contracts need consent?",
        "answer": "The Supply Agreement.",
    }
    return JudgeRequest(**{**defaults, **fields})  # type: ignore[arg-type]


def test_prompt_shows_task_question_and_answer_and_reference_only_when_given() -> None:
    system, user = render_messages(request())
    assert "JSON object" in system["content"]
    assert 'Criterion "accuracy": Names both contracts?' in user["content"]
    assert "<answer>\nThe Supply Agreement.\n</answer>" in user["content"]
    assert "<reference>" not in user["content"]
    _, with_reference = render_messages(request(reference="Supply and Licence."))
    assert "<reference>\nSupply and Licence.\n</reference>" in with_reference["content"]


def test_prompt_marks_an_empty_answer_and_clips_huge_ones() -> None:
    _, user = render_messages(request(answer="  "))
    assert "(the agent wrote no answer)" in user["content"]
    clipped = clip("a" * 50 + "b" * 50, limit=20)
    assert clipped == "a" * 10 + "\n[... 80 characters cut ...]\n" + "b" * 10
    assert clip("short", limit=20) == "short"


def test_prompt_version_is_a_stable_hash_of_the_templates() -> None:
    assert prompt_version() == prompt_version()
    assert len(prompt_version()) == 12 and int(prompt_version(), 16) >= 0


@pytest.mark.parametrize(
    ("scores", "share"),
    [([1.0, 1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([0.9, 0.6, 0.2, 0.7], 0.75), ([0.5, 0.49], 0.5)],
)
def test_agreement_is_the_majority_share(scores: list[float], share: float) -> None:
    assert agreement(scores) == share
