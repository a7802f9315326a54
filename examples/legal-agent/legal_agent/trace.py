"""The transcript (one JSON object per step) and the usage meter (token-equivalents and cost)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any


def token_count(text: str) -> int:
    """Token-equivalents: about four characters per token, as for English with common tokenizers."""
    return math.ceil(len(text) / 4) if text else 0


class Trace:
    def __init__(self, path: Path, price: tuple[float, float]) -> None:
        self.handle = path.open("w", encoding="utf-8")
        self.price = price
        self.step_no = 0
        self.started = time.monotonic()
        self.input_tokens = 0
        self.output_tokens = 0
        self.llm_cost: float | None = None

    def step(self, kind: str, **fields: Any) -> None:
        self.step_no += 1
        record = {
            "step": self.step_no,
            "ms": round((time.monotonic() - self.started) * 1000, 1),
            "type": kind,
            **fields,
        }
        self.handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self.handle.flush()

    def read(self, text: str) -> None:
        """Text that goes into the model's context."""
        self.input_tokens += token_count(text)

    def wrote(self, text: str) -> None:
        self.output_tokens += token_count(text)

    def usage(self) -> dict[str, float | int]:
        per_in, per_out = self.price
        cost = (self.input_tokens * per_in + self.output_tokens * per_out) / 1_000_000
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(cost, 6),
        }

    def close(self) -> None:
        self.handle.close()
