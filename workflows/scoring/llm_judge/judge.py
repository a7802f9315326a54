"""`LlmJudge`: the `Judge` protocol over an OpenAI-compatible chat-completions API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workflows.records import JudgeRecord
from workflows.scoring.judge_protocol import JudgeRequest, JudgeUnavailable, JudgeVerdict
from workflows.scoring.llm_judge.cache import CachedSample, VerdictCache, cache_key
from workflows.scoring.llm_judge.chat_client import ChatClient
from workflows.scoring.llm_judge.config import JudgeConfig
from workflows.scoring.llm_judge.judge_reply import MalformedVerdict, parse_verdict
from workflows.scoring.llm_judge.limiter import CallGate, Pacer, TokenBucket
from workflows.scoring.llm_judge.prompt import prompt_version, render_messages

PASS_THRESHOLD = 0.5  # agreement counts samples on the same side of this score


@dataclass(frozen=True)
class Sample:
    verdict: CachedSample
    calls: int  # API requests this sample took now (0 = from the cache)


class LlmJudge:
    """Thread-safe: one instance serves every grading thread of a worker. Call `close()`.

    `rate` paces the requests (retries included); None = this process's own token bucket at
    `config.rate_per_s`. The composition root passes the cluster's shared one. `on_call(outcome)`
    per verdict asked for: "cached" (no request), "ok", "malformed" or "unavailable" (the worker's
    metrics count them: docs/deploy.md, "Metrics")."""

    def __init__(
        self,
        config: JudgeConfig,
        *,
        rate: Pacer | None = None,
        on_call: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._on_call = on_call or (lambda outcome: None)
        self.prompt_version = prompt_version()
        pacer = rate if rate is not None else TokenBucket(config.rate_per_s, config.burst)
        gate = CallGate(config.concurrency, pacer)
        self._client = ChatClient(config, gate)
        self._cache = VerdictCache(config.cache_dir)

    def close(self) -> None:
        self._client.close()

    def judge(self, request: JudgeRequest) -> JudgeVerdict:
        samples = [self._sample(request, index) for index in range(max(1, request.samples))]
        return self._combine(samples)

    def _key(self, request: JudgeRequest, index: int) -> str:
        return cache_key(
            {
                "model": self.config.model,
                "prompt_version": self.prompt_version,
                "temperature": self.config.temperature,
                "criterion": request.criterion,
                "question": request.question,
                "task": request.task,
                "answer": request.answer,
                "reference": request.reference,
                "sample": index,
            }
        )

    def _sample(self, request: JudgeRequest, index: int) -> Sample:
        key = self._key(request, index)
        cached = self._cache.get(key)
        if cached is not None:
            self._on_call("cached")
            return Sample(cached, calls=0)
        sample = self._ask(request)
        self._cache.put(
            key, sample.verdict, model=self.config.model, prompt_version=self.prompt_version
        )
        return sample

    def _ask(self, request: JudgeRequest) -> Sample:
        """Ask until the reply is a valid verdict, at most `malformed_attempts` times."""
        messages = render_messages(request)
        tokens_in = tokens_out = 0
        problem = ""
        for attempt in range(1, self.config.malformed_attempts + 1):
            try:
                reply = self._client.complete(messages)
            except JudgeUnavailable:
                self._on_call("unavailable")
                raise
            tokens_in += reply.input_tokens
            tokens_out += reply.output_tokens
            try:
                score, rationale = parse_verdict(reply.content)
            except MalformedVerdict as error:
                self._on_call("malformed")
                problem = str(error)
                continue
            self._on_call("ok")
            return Sample(CachedSample(score, rationale, tokens_in, tokens_out), calls=attempt)
        raise JudgeUnavailable(
            f"the judge's reply was not a valid verdict {self.config.malformed_attempts} times "
            f"(last: {problem})"
        )

    def _combine(self, samples: list[Sample]) -> JudgeVerdict:
        scores = [s.verdict.score for s in samples]
        mean = sum(scores) / len(scores)
        fresh = [s for s in samples if s.calls]
        tokens_in = sum(s.verdict.input_tokens for s in fresh)
        tokens_out = sum(s.verdict.output_tokens for s in fresh)
        record = JudgeRecord(
            model=self.config.model,
            prompt_version=self.prompt_version,
            samples=len(samples),
            sample_scores=tuple(scores),
            agreement=agreement(scores) if len(scores) > 1 else None,
            calls=sum(s.calls for s in samples),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            cost_usd=self.config.cost_usd(tokens_in, tokens_out),
        )
        return JudgeVerdict(mean, _rationale(samples, mean, record), record)


def agreement(scores: list[float]) -> float:
    """The share of samples on the majority side of PASS_THRESHOLD (1.0 = unanimous)."""
    passing = sum(1 for s in scores if s >= PASS_THRESHOLD)
    return max(passing, len(scores) - passing) / len(scores)


def _rationale(samples: list[Sample], mean: float, record: JudgeRecord) -> str:
    """One sample: its rationale. Several: agreement, the scores, and the most typical rationale."""
    typical = min(samples, key=lambda s: abs(s.verdict.score - mean)).verdict.rationale
    if len(samples) == 1:
        return typical
    agreeing = round((record.agreement or 0.0) * len(samples))
    shown = ", ".join(f"{s:.2f}" for s in record.sample_scores)
    return f"{agreeing}/{len(samples)} samples agree ({shown}): {typical}"
