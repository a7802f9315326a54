"""A chat-completions client over httpx with retries: 429s (honouring Retry-After), 5xx, time-outs
and dropped connections are retried with exponential backoff; other 4xx fail at once.

Nothing here logs or raises the API key: it lives only in the client's default headers, and any
server message quoted in an error is scrubbed of it first.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from workflows.scoring.judge_protocol import JudgeUnavailable
from workflows.scoring.llm_judge.config import JudgeConfig
from workflows.scoring.llm_judge.limiter import CallGate

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class ChatReply:
    content: str
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class _Retry:
    reason: str
    wait_s: float | None = None  # from Retry-After; None = our own backoff


class ChatClient:
    def __init__(self, config: JudgeConfig, gate: CallGate) -> None:
        self._config = config
        self._gate = gate
        self._http = httpx.Client(
            base_url=config.base_url.rstrip("/") + "/",
            timeout=httpx.Timeout(config.timeout_s),
            headers=_headers(config),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def complete(self, messages: Messages) -> ChatReply:
        """One completion; JudgeUnavailable once retries are spent or on a non-retryable error."""
        payload = self._payload(messages)
        attempts = self._config.max_attempts
        for attempt in range(1, attempts + 1):
            with self._gate.slot():
                outcome = self._once(payload)
            if isinstance(outcome, ChatReply):
                return outcome
            if attempt == attempts:
                raise JudgeUnavailable(f"the judge API failed {attempts} times: {outcome.reason}")
            wait = self._wait(outcome, attempt)
            log.warning(
                "judge: %s; retrying in %.1f s (attempt %d/%d)",
                outcome.reason,
                wait,
                attempt + 1,
                attempts,
            )
            self._config.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _payload(self, messages: Messages) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._config.model,
            "messages": messages,
            "temperature": self._config.temperature,
            "max_tokens": self._config.max_tokens,
        }
        if self._config.json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _once(self, payload: dict[str, Any]) -> ChatReply | _Retry:
        try:
            response = self._http.post("chat/completions", json=payload)
        except httpx.TimeoutException:
            return _Retry(f"no answer within {self._config.timeout_s:g} s")
        except httpx.TransportError as error:
            return _Retry(f"could not reach the judge API ({type(error).__name__})")
        if response.status_code == 200:
            return self._reply(response)
        problem = f"HTTP {response.status_code}: {self._message(response)}"
        if response.status_code in RETRYABLE_STATUS:
            return _Retry(problem, retry_after(response.headers))
        raise JudgeUnavailable(f"the judge API refused the request ({problem})")

    def _reply(self, response: httpx.Response) -> ChatReply | _Retry:
        try:
            body = response.json()
            content = body["choices"][0]["message"]["content"]
            usage = body.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            return _Retry("the judge API answered 200 with a body that is not a chat completion")
        return ChatReply(
            content=content if isinstance(content, str) else "",
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
        )

    def _message(self, response: httpx.Response) -> str:
        """The server's error message, short and without the key."""
        try:
            error = response.json().get("error")
            text = error.get("message", "") if isinstance(error, dict) else str(error or "")
        except (ValueError, AttributeError):
            text = response.text
        return _scrub(" ".join(text.split())[:200], self._config) or response.reason_phrase

    def _wait(self, outcome: _Retry, attempt: int) -> float:
        cap = self._config.backoff_max_s
        if outcome.wait_s is not None:
            return min(outcome.wait_s, cap)
        backoff = min(cap, self._config.backoff_base_s * 2.0 ** (attempt - 1))
        return backoff * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not cryptography


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds: float = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds)


def _headers(config: JudgeConfig) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if config.api_key is not None and config.api_key.get_secret_value():
        headers["authorization"] = f"Bearer {config.api_key.get_secret_value()}"
    return headers


def _scrub(text: str, config: JudgeConfig) -> str:
    key = config.api_key.get_secret_value() if config.api_key is not None else ""
    return text.replace(key, "[redacted]") if key else text


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
