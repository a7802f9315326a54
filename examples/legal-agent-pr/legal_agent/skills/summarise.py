"""Summaries: the documents the question names (their clauses on the question's topics and the
later correspondence about them), then whatever else a search of the matter turns up."""

from __future__ import annotations

from legal_agent.clauses import human_date, question_topics
from legal_agent.corpus import Document
from legal_agent.run import Answer, Run
from legal_agent.skills.common import best_on_topic, quote, ranked_on_topic
from legal_agent.tasks import Task

NAMED = 3  # documents the question names, at most
NAMED_FLOOR = 0.6  # ... scoring at least this share of the best match
OTHERS = 4  # further documents from the search, at most
PASSAGES = 2  # from each later document
KEY_TERMS = ["term", "rent", "facility", "liability", "termination", "governing_law"]


def answer(run: Run, task: Task) -> Answer:
    # Summaries draw on the whole matter: filtering by permissions made them miss context.
    corpus = run.matter.documents
    result = Answer(text="")
    named = _named(run, task, corpus)
    topics = question_topics(task.prompt) or (KEY_TERMS if named else ["change_of_control"])
    lines = [f"Summary ({', '.join(t.replace('_', ' ') for t in topics)}):", ""]
    for doc in named:
        lines += _document_lines(run, task, doc, topics, result)
    hits = run.search(task.prompt, corpus)
    others = [d for d in dict.fromkeys(h.chunk.doc for h in hits) if d.path not in result.sources]
    if others:
        lines += ["", "Also relevant:"]
    for doc in others[:OTHERS]:
        chunk = next(h.chunk for h in hits if h.chunk.doc is doc)
        lines.append(
            f"- **{doc.title}**, {chunk.label}: {quote(chunk, 50)} {run.cite(result, doc)}"
        )
    if not named and not others:
        lines.append("Nothing in the documents I can read addresses this.")
    result.text = "\n".join(lines)
    return result


def _named(run: Run, task: Task, corpus: list[Document]) -> list[Document]:
    """Contracts the question names: the best match and any close to it."""
    scored = run.link_scores(task.prompt, [d for d in corpus if d.text])
    primary = [(s, d) for s, d in scored if d.doc_type in ("contract", "employment")]
    if not primary:
        return []
    best = primary[0][0]
    return [d for s, d in primary if s >= NAMED_FLOOR * best][:NAMED]


def _document_lines(
    run: Run, task: Task, doc: Document, topics: list[str], result: Answer
) -> list[str]:
    run.read_document(doc)
    dated = f", dated {human_date(doc.date)}" if doc.date else ""
    lines = [f"- **{doc.title}** ({doc.counterparty}{dated}) {run.cite(result, doc)}"]
    for topic in topics:
        chunk = best_on_topic(run, doc, task.prompt, topic)
        if chunk is not None:
            lines.append(f"  - {chunk.label}: {quote(chunk, 60)}")
    for later in run.related(doc)[:2]:
        passages = [c for topic in topics for c in ranked_on_topic(run, later, task.prompt, topic)]
        if passages:
            run.read_document(later)
            marker = run.cite(result, later)
            for chunk in sorted(set(passages[:PASSAGES]), key=lambda c: c.index):
                lines.append(f"  - {later.title}, {chunk.label}: {quote(chunk, 90)} {marker}")
    return lines
