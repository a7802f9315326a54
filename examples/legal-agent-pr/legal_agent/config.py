"""Where things are and how the agent behaves: sandbox paths, arm config knobs and their defaults.

Arm config (case.json `arm.config`, all values strings):

    retriever     keyword | bm25        how chunks are ranked
    top_k         int                   chunks read per search (context budget)
    spread        true | false          one best chunk per document instead of a global top-k
    model         a PRICES key          prices usage; offline it also sets how often the model slips
    permissions   respect | ignore      whether restricted documents are filtered out
    llm           auto | off            auto: call an OpenAI-compatible API when it is configured
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RETRIEVER = "bm25"
DEFAULT_TOP_K = 6
DEFAULT_SPREAD = True
DEFAULT_MODEL = "gpt-4o-mini"

# USD per million tokens (input, output), and the offline slip rate standing in for model quality.
PRICES = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4o": (2.50, 10.00),
    "o3-mini": (1.10, 4.40),
}
SLIP_RATE = {"gpt-4o-mini": 0.10, "gpt-4.1-mini": 0.06, "gpt-4o": 0.04, "o3-mini": 0.03}


@dataclass(frozen=True)
class Paths:
    case: Path
    world: Path
    out: Path
    repo: Path

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Paths:
        env = dict(os.environ if env is None else env)
        return cls(
            case=Path(env.get("EVALBOT_CASE_DIR", "/case")),
            world=Path(env.get("EVALBOT_WORLD_DIR", "/world")),
            out=Path(env.get("EVALBOT_OUT_DIR", "/out")),
            repo=Path(env.get("EVALBOT_REPO_DIR", "/repo")),
        )


@dataclass(frozen=True)
class Settings:
    retriever: str = DEFAULT_RETRIEVER
    top_k: int = DEFAULT_TOP_K
    spread: bool = DEFAULT_SPREAD
    model: str = DEFAULT_MODEL
    respect_permissions: bool = True
    llm: str = "auto"

    @classmethod
    def from_arm_config(cls, config: dict[str, object]) -> Settings:
        def text(key: str, default: str) -> str:
            return str(config.get(key, default)).strip().lower()

        retriever = text("retriever", DEFAULT_RETRIEVER)
        if retriever not in ("keyword", "bm25"):
            raise ValueError(f"retriever must be keyword or bm25, not {retriever!r}")
        top_k = int(text("top_k", str(DEFAULT_TOP_K)))
        if not 1 <= top_k <= 50:
            raise ValueError(f"top_k must be between 1 and 50, not {top_k}")
        permissions = text("permissions", "respect")
        if permissions not in ("respect", "ignore"):
            raise ValueError(f"permissions must be respect or ignore, not {permissions!r}")
        return cls(
            retriever=retriever,
            top_k=top_k,
            spread=text("spread", str(DEFAULT_SPREAD)) in ("1", "true", "yes", "on"),
            model=str(config.get("model", DEFAULT_MODEL)),
            respect_permissions=permissions == "respect",
            llm=text("llm", "auto"),
        )

    @property
    def slip_rate(self) -> float:
        return SLIP_RATE.get(self.model, SLIP_RATE[DEFAULT_MODEL])

    @property
    def price(self) -> tuple[float, float]:
        return PRICES.get(self.model, PRICES[DEFAULT_MODEL])
