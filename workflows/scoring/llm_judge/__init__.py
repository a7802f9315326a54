"""An LLM judge over an OpenAI-compatible chat-completions API (docs/judges.md).

    judge = LlmJudge(JudgeConfig(base_url="https://api.openai.com/v1", model="gpt-4o-mini",
                                 api_key=SecretStr(key), cache_dir=data_dir / "judge-cache"))
    grade_case(case, outputs, world, judge=judge)
    judge.close()

Pinned (model + prompt template version in every cache key and record), cached on disk, rate
limited and bounded in concurrency across threads, retried on 429s, 5xx and timeouts, and checked
for self-agreement when a criterion asks for `judge_samples > 1`.
"""

from workflows.scoring.llm_judge.config import JudgeConfig
from workflows.scoring.llm_judge.judge import LlmJudge
from workflows.scoring.llm_judge.judge_reply import MalformedVerdict, parse_verdict
from workflows.scoring.llm_judge.prompt import prompt_version, render_messages

__all__ = [
    "JudgeConfig",
    "LlmJudge",
    "MalformedVerdict",
    "parse_verdict",
    "prompt_version",
    "render_messages",
]
