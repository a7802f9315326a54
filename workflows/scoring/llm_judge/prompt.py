"""The judge prompt: two jinja2 templates (system, user) next to this module.

`prompt_version()` is a hash of both template sources, so editing the prompt changes every cache
key and every stored JudgeRecord — an old verdict is never reused for a new prompt.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources

from jinja2 import Environment, StrictUndefined, Template

from workflows.scoring.judge_protocol import JudgeRequest

SYSTEM_TEMPLATE = "judge_system.j2"
USER_TEMPLATE = "judge_user.j2"
MAX_TEXT_CHARS = 60_000  # per field; a longer answer is cut in the middle, with a note


def _source(name: str) -> str:
    return resources.files("workflows.scoring.llm_judge").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _templates() -> tuple[Template, Template]:
    env = Environment(  # noqa: S701 - plain text for an API, not HTML
        undefined=StrictUndefined, keep_trailing_newline=False, trim_blocks=True
    )
    return env.from_string(_source(SYSTEM_TEMPLATE)), env.from_string(_source(USER_TEMPLATE))


@functools.cache
def prompt_version() -> str:
    digest = hashlib.sha256()
    for name in (SYSTEM_TEMPLATE, USER_TEMPLATE):
        digest.update(_source(name).encode())
    return digest.hexdigest()[:12]


def clip(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`text`, or its head and tail with a note of how much was cut from the middle."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"


def render_messages(request: JudgeRequest) -> list[dict[str, str]]:
    """The chat messages for one judgement."""
    system, user = _templates()
    content = user.render(
        criterion=request.criterion,
        question=request.question,
        task=clip(request.task),
        reference=None if request.reference is None else clip(request.reference),
        answer=clip(request.answer) if request.answer.strip() else "(the agent wrote no answer)",
    )
    return [
        {"role": "system", "content": system.render().strip()},
        {"role": "user", "content": content.strip()},
    ]
