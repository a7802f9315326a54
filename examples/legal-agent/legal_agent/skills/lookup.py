"""Questions about one contract: find it, find the clauses the question is about, read the values,
and check later documents (amendments, correspondence) when the question asks for the current
position."""

from __future__ import annotations

import re

from legal_agent.chunks import Chunk
from legal_agent.clauses import (
    PERCENT,
    amounts,
    chunk_topics,
    coc_category,
    dates,
    governing_law,
    human_date,
    notice_period,
)
from legal_agent.corpus import Document
from legal_agent.run import Answer, Run
from legal_agent.skills.common import (
    COC_WORDS,
    best_on_topic,
    is_definition,
    quote,
    ranked_on_topic,
)
from legal_agent.tasks import Task

LABELS = {
    "change_of_control": "Change of control",
    "exclusivity": "Exclusivity",
    "governing_law": "Governing law",
    "renewal": "Renewal",
    "term": "Term",
    "termination": "Termination",
    "liability": "Liability cap",
    "notices": "Notices",
    "rent": "Rent",
    "break": "Break option",
    "facility": "Facility",
    "margin": "Margin",
    "salary": "Salary",
    "notice_period": "Notice period",
    "confidentiality": "Confidentiality",
    "non_solicitation": "Non-solicitation",
    "consent_status": "Consent",
}
CURRENT_TOPICS = {"notices", "term", "consent_status", "rent"}
LATER_PASSAGES = 2


def answer(run: Run, task: Task) -> Answer:
    linked = run.link(task.prompt, run.contracts())
    if not linked:
        return _open_search(run, task)
    doc = linked[0]
    run.read_document(doc)
    topics = list(task.topics) or _guess_topics(run, doc, task)
    result = Answer(text="")
    lines = [f"**{doc.title}** — {doc.counterparty or 'see document'} {run.cite(result, doc)}", ""]
    for topic in topics:
        lines += _topic_lines(run, task, doc, topic, result)
    result.text = "\n".join(lines).strip()
    if task.wants_json:
        result.data = _json_fields(run, task, doc)
    return result


def _topic_lines(run: Run, task: Task, doc: Document, topic: str, result: Answer) -> list[str]:
    chunk = best_on_topic(run, doc, task.prompt, topic)
    lines = []
    if chunk is None:
        lines.append(f"- {LABELS[topic]}: the {doc.title.lower()} has no clause on this.")
    else:
        value = summarise_value(topic, chunk)
        lines.append(
            f"- {LABELS[topic]}: {value} — {chunk.label}: {quote(chunk)} {run.cite(result, doc)}"
        )
        lines += _definitions(run, doc, chunk, result)
    if task.latest or topic in CURRENT_TOPICS:
        lines += _later(run, task, doc, topic, result)
    return lines


def _definitions(run: Run, doc: Document, chunk: Chunk, result: Answer) -> list[str]:
    """Defined terms used in the clause ("the Termination Date") and what they mean."""
    lines = []
    for term in re.findall(r"\b(?:the )?([A-Z][a-z]+(?: [A-Z][a-z]+)+)\b", chunk.text):
        for other in run.chunks(doc):
            if other is not chunk and is_definition(other) and f'"{term}" means' in other.text:
                lines.append(
                    f"  - “{term}” ({other.label}): {quote(other)} {run.cite(result, doc)}"
                )
    return list(dict.fromkeys(lines))


def _later(run: Run, task: Task, doc: Document, topic: str, result: Answer) -> list[str]:
    """The newest later document on the same contract that deals with the topic: its two most
    relevant passages that state a value."""
    for later in run.related(doc):
        if later.date and doc.date and later.date < doc.date:
            continue
        chunks = ranked_on_topic(run, later, task.prompt, topic)
        if not chunks:
            continue
        run.read_document(later)
        when = human_date(later.date) if later.date else "undated"
        lines = [f"- Later: {later.title} ({when}):"]
        for chunk in sorted(chunks[:LATER_PASSAGES], key=lambda c: c.index):
            lines.append(f"  - {chunk.label}: {quote(chunk, 90)} {run.cite(result, later)}")
            following = _address_block(run, later, chunk)
            if following:
                lines.append(f"  - Address now notified: {following} {run.cite(result, later)}")
        return lines
    return []


def _address_block(run: Run, doc: Document, chunk: Chunk) -> str | None:
    """A notified address that follows 'must now be sent to:' on its own lines."""
    if not chunk.text.rstrip().endswith(":"):
        return None
    chunks = run.chunks(doc)
    position = chunks.index(chunk)
    return chunks[position + 1].text if position + 1 < len(chunks) else None


def summarise_value(topic: str, chunk: Chunk) -> str:
    text = chunk.full_text
    money = amounts(chunk.text)
    found_dates = dates(chunk.text)
    if topic == "governing_law":
        return f"the laws of {governing_law(text)}" if governing_law(text) else "see clause"
    if topic in ("liability", "rent", "facility", "salary") and money:
        return money[0][0]
    if topic == "margin" and PERCENT.search(chunk.text):
        return f"{PERCENT.search(chunk.text).group(1)} per cent"
    if topic == "term" and found_dates:
        return f"ends {human_date(max(found_dates))}"
    if topic == "break" and found_dates:
        period = notice_period(text)
        return f"{human_date(found_dates[0])}" + (f", on {period}' notice" if period else "")
    if topic in ("notice_period", "termination") and notice_period(text):
        return str(notice_period(text))
    if topic == "change_of_control":
        return COC_WORDS.get(coc_category(chunk.text), "see clause")
    return "as quoted"


def _guess_topics(run: Run, doc: Document, task: Task) -> list[str]:
    best = run.best_in(doc, task.prompt, lambda c: bool(chunk_topics(c.full_text)))
    return sorted(chunk_topics(best.full_text))[:1] if best else []


def _open_search(run: Run, task: Task) -> Answer:
    hits = run.search(task.prompt, run.readable)
    result = Answer(text="")
    lines = ["I could not tell which contract you mean; these clauses look most relevant:", ""]
    for hit in hits[:3]:
        lines.append(
            f"- {hit.chunk.doc.title}, {hit.chunk.label}: {quote(hit.chunk)} "
            f"{run.cite(result, hit.chunk.doc)}"
        )
    result.text = "\n".join(lines)
    return result


FIELD = re.compile(r"\b([a-z]+(?:_[a-z]+)+|counterparty|title)\b")


def _json_fields(run: Run, task: Task, doc: Document) -> dict:
    fields = list(dict.fromkeys(FIELD.findall(task.prompt)))
    term = run.best_in(
        doc, "term starts continues until", lambda c: "term" in chunk_topics(c.full_text)
    )
    term_dates = sorted(dates(term.text)) if term else []
    law = next(
        (governing_law(c.full_text) for c in run.chunks(doc) if governing_law(c.full_text)), None
    )
    cap = run.best_in(doc, "liability limited", lambda c: "liability" in chunk_topics(c.full_text))
    cap_amounts = amounts(cap.text) if cap else []
    values = {
        "counterparty": doc.counterparty or None,
        "title": doc.title,
        "governing_law": law,
        "effective_date": term_dates[0].isoformat() if term_dates else None,
        "expiry_date": term_dates[-1].isoformat() if len(term_dates) > 1 else None,
        "liability_cap": cap_amounts[0][1] if cap_amounts else None,
        "cap_currency": cap_amounts[0][2] if cap_amounts else None,
    }
    data = {name: values.get(name) for name in fields}
    data["sources"] = [doc.path]
    return data
