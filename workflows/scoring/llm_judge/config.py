"""The judge's configuration: where it is, which model, and how politely to call it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str  # e.g. https://api.openai.com/v1; requests go to {base_url}/chat/completions
    model: str
    api_key: SecretStr | None = field(default=None, repr=False)
    timeout_s: float = 60.0  # per request
    max_attempts: int = 6  # per request: 429s, 5xx, timeouts and connection errors are retried
    malformed_attempts: int = 3  # a reply that is not a valid verdict is asked again this often
    backoff_base_s: float = 1.0  # exponential backoff with jitter: base * 2^(attempt-1)
    backoff_max_s: float = 60.0  # also the most a Retry-After header can make us wait
    rate_per_s: float = 5.0  # requests per second across threads; 0 = unlimited
    burst: int = 1  # requests allowed back to back before the rate applies
    concurrency: int = 4  # requests in flight at once across threads
    temperature: float = 0.0
    max_tokens: int = 512
    json_mode: bool = True  # send response_format={"type": "json_object"}
    cache_dir: Path | None = None  # None = no cache
    input_usd_per_mtok: float = 0.0  # prices, for the judge cost in the report
    output_usd_per_mtok: float = 0.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"judge base URL must be http(s), got {self.base_url[:80]!r}")
        if not self.model:
            raise ValueError("judge model must be set")
        if self.max_attempts < 1 or self.malformed_attempts < 1 or self.concurrency < 1:
            raise ValueError("judge attempts and concurrency must be at least 1")

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        return (
            input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok
        ) / 1e6
