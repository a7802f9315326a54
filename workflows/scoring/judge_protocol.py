"""The interface an LLM judge implements for `llm` criteria. The judge itself is configured at the
edge (the score worker) and passed to `grade_case`; scoring never builds one.

`workflows.scoring.llm_judge.LlmJudge` is the implementation over an OpenAI-compatible API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from workflows.records import JudgeRecord


@dataclass(frozen=True)
class JudgeRequest:
    """What the judge sees for one criterion of one run."""

    case_id: str
    criterion: str
    question: str  # the criterion's `prompt` param: what the judge is asked
    task: str  # the case prompt the agent was given
    answer: str  # the agent's answer text
    reference: str | None = None  # the case's reference answer, when the criterion asks for it
    samples: int = 1  # the criterion's `judge_samples`: ask this many times, report agreement


@dataclass(frozen=True)
class JudgeVerdict:
    score: float  # in [0, 1]
    rationale: str
    record: JudgeRecord | None = None  # model, samples and agreement, tokens and cost


class JudgeUnavailable(Exception):
    """The judge could not answer (API down, rate limited, unparseable reply). The run is then
    a `judge_error` (an infrastructure error), never a score."""


class Judge(Protocol):
    def judge(self, request: JudgeRequest) -> JudgeVerdict:
        """Grade one criterion; raise JudgeUnavailable when no verdict can be had."""
        ...
