"""Helpers several skills share: clause quoting and the operative change-of-control clause."""

from __future__ import annotations

import re

from legal_agent.chunks import Chunk
from legal_agent.clauses import chunk_topics, coc_category, has_topic, has_value
from legal_agent.corpus import Document
from legal_agent.run import Run

QUOTE_WORDS = 70
DEFINITION = re.compile(r'^\s*[“"][^"”]+[”"] means\b')


def quote(chunk: Chunk, words: int = QUOTE_WORDS) -> str:
    parts = chunk.text.split()
    text = " ".join(parts[:words]) + (" …" if len(parts) > words else "")
    return f"“{text}”"


def is_definition(chunk: Chunk) -> bool:
    """A clause that only defines a term: `"Change of Control" means ...`."""
    return bool(DEFINITION.match(chunk.text))


def operative_coc(run: Run, doc: Document) -> tuple[Chunk | None, str]:
    """The clause that says what a change of control does, and its category."""
    for chunk in run.chunks(doc):
        if has_topic(chunk.full_text, "change_of_control") and not is_definition(chunk):
            category = coc_category(chunk.text)
            if category not in ("none", "other"):
                return chunk, category
    return None, "none"


COC_WORDS = {
    "consent": "the counterparty's prior written consent is required",
    "termination_right": "the counterparty may terminate",
    "prepayment": "the lender may cancel and require prepayment unless it consents",
    "payment": "a payment becomes due",
    "notice": "notice must be given",
    "none": "no change-of-control provision",
}


def best_on_topic(run: Run, doc: Document, question: str, topic: str) -> Chunk | None:
    return run.best_in(
        doc,
        question,
        lambda c: topic in chunk_topics(c.full_text),
        prefer=lambda c: has_value(topic, c.text),
    )


def ranked_on_topic(run: Run, doc: Document, question: str, topic: str) -> list[Chunk]:
    """Chunks of `doc` on the topic that state a value, best first."""
    found = []
    remaining = [c for c in run.chunks(doc) if topic in chunk_topics(c.full_text)]
    while remaining:
        best = run.best_in(doc, question, lambda c, pool=remaining: c in pool)
        if best is None:
            break
        remaining.remove(best)
        if has_value(topic, best.text):
            found.append(best)
    return found
