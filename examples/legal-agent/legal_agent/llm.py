"""Optional: polish the answer with an OpenAI-compatible chat model.

Used only when both OPENAI_BASE_URL and OPENAI_API_KEY are set and the arm does not say llm=off;
offline the agent never tries to connect. The model sees the question and the draft answer (which
holds the quoted clauses and the source list) and must keep every citation.
"""

from __future__ import annotations

import json
import os
import urllib.request

SYSTEM = (
    "You are a careful law-firm associate. Rewrite the draft answer so it reads well. Use only "
    "facts in the draft; keep every quotation, clause number and [n] citation, and keep the "
    "Sources list exactly as it is."
)


def configured(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ if env is None else env)
    return bool(env.get("OPENAI_BASE_URL") and env.get("OPENAI_API_KEY"))


def polish(question: str, draft: str, model: str, timeout_s: float = 60) -> tuple[str, dict]:
    """(new text, usage dict from the API). Raises OSError/ValueError on failure."""
    body = {
        "model": model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question:\n{question}\n\nDraft answer:\n{draft}"},
        ],
    }
    base_url = os.environ["OPENAI_BASE_URL"].rstrip("/")
    if not base_url.startswith(("https://", "http://")):
        raise ValueError(f"OPENAI_BASE_URL must be an http(s) URL, not {base_url!r}")
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
        base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) only
        payload = json.loads(response.read())
    text = payload["choices"][0]["message"]["content"]
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty completion")
    return text, payload.get("usage", {})
