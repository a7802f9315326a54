"""Which contracts have X? — search the contracts' clauses, keep the ones that satisfy the
question, one line per contract. Tables do the same with columns."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable

from legal_agent.chunks import Chunk
from legal_agent.clauses import (
    chunk_topics,
    coc_category,
    governing_law,
    is_exclusive,
    notice_period,
    renews_automatically,
    sentences,
)
from legal_agent.run import Answer, Run
from legal_agent.skills.common import is_definition, quote
from legal_agent.tasks import Task

EXPANSION = {
    "change_of_control": "change of control consent terminate",
    "exclusivity": "exclusive exclusively territory",
    "governing_law": "governed by laws of",
    "renewal": "renews automatically renewal notice",
    "termination": "may terminate notice",
    "term": "term continues until expire",
}
LAWS = ("England and Wales", "Scotland", "Ireland", "Spain", "Singapore", "New York", "Delaware")


def predicate(task: Task, topic: str) -> Callable[[Chunk], bool]:
    lowered = task.prompt.lower()
    if topic == "change_of_control":
        wanted = {
            "consent": ("consent",),
            "prepay": ("prepayment",),
            "terminat": ("termination_right",),
        }
        for word, categories in wanted.items():
            if word in lowered:
                return lambda c, cats=categories: coc_category(c.text) in cats
        return lambda c: coc_category(c.text) not in ("none", "other")
    if topic == "exclusivity":
        return lambda c: is_exclusive(c.full_text)
    if topic == "renewal":
        return lambda c: renews_automatically(c.full_text)
    if topic == "governing_law":
        other = re.search(r"other than (?:the )?(?:laws? of )?(?:the )?([A-Z][\w ]+)", task.prompt)
        if other:
            excluded = other.group(1).strip()
            return lambda c: (
                bool(governing_law(c.full_text))
                and not excluded.startswith(str(governing_law(c.full_text)))
            )
        return lambda c: bool(governing_law(c.full_text))
    return lambda c: topic in chunk_topics(c.full_text)


def find(run: Run, task: Task) -> list[Chunk]:
    """One matching clause per contract, in search order."""
    topic = task.topics[0] if task.topics else ""
    accept = predicate(task, topic)
    query = f"{task.prompt} {EXPANSION.get(topic, '')}"
    hits = run.search(query, run.contracts())
    found: dict[str, Chunk] = {}
    for hit in hits:
        chunk = hit.chunk
        if chunk.path in found or is_definition(chunk):
            continue
        if topic in chunk_topics(chunk.full_text) and accept(chunk):
            found[chunk.path] = chunk
    run.trace.step("filter", topic=topic, kept=list(found))
    return list(found.values())


def answer(run: Run, task: Task) -> Answer:
    chunks = find(run, task)
    result = Answer(text="")
    if not chunks:
        result.text = (
            f"I found no contract that matches in the {len(run.last_hits)} most relevant clauses."
        )
        return result
    lines = [f"I found {len(chunks)} contract(s):", ""]
    for chunk in chunks:
        doc = chunk.doc
        detail = _detail(task, chunk)
        lines.append(
            f"- **{doc.counterparty or doc.title}** — {doc.title}, {chunk.label}{detail}: "
            f"{quote(chunk, 55)} {run.cite(result, doc)}"
        )
    lines += ["", f"Based on the {run.settings.top_k} most relevant clauses I searched."]
    result.text = "\n".join(lines)
    return result


def _detail(task: Task, chunk: Chunk) -> str:
    topic = task.topics[0] if task.topics else ""
    if topic == "governing_law":
        return f" (law of {governing_law(chunk.full_text)})"
    if topic == "change_of_control":
        return f" ({coc_category(chunk.text).replace('_', ' ')})"
    return ""


def table(run: Run, task: Task) -> Answer:
    if task.wants_json and "term" in task.topics:
        from legal_agent.skills.register import expiring

        return expiring(run, task)
    chunks = find(run, task)
    columns = list(task.columns) or ["document", "counterparty", "clause", "text"]
    rows = [[_cell(column, chunk) for column in columns] for chunk in chunks]
    result = Answer(text="")
    for chunk in chunks:
        run.cite(result, chunk.doc)
    if task.wants_csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        content = buffer.getvalue()
        target = task.save_path or "artifacts/table.csv"
        _save(run, target, content)
        result.text = f"I saved a CSV with {len(rows)} rows as `{target}`.\n\n" + _markdown(
            columns, rows
        )
    else:
        result.text = _markdown(columns, rows)
    return result


def _save(run: Run, target: str, content: str) -> None:
    base = run.paths.out if target.startswith("artifacts/") else run.paths.world
    path = base / target
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    run.trace.wrote(content)
    run.trace.step("write_file", path=target, bytes=len(content.encode()))


def _markdown(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(column: str, chunk: Chunk) -> str:
    name = column.lower().replace(" ", "_")
    doc = chunk.doc
    first = sentences(chunk.text)[0] if chunk.text else ""
    values = {
        "document": doc.path,
        "contract": doc.title,
        "title": doc.title,
        "counterparty": doc.counterparty,
        "clause": chunk.clause or "",
        "governing_law": governing_law(chunk.full_text) or "",
        "law": governing_law(chunk.full_text) or "",
        "notice_period": notice_period(chunk.full_text) or "",
        "termination_right": first[:200],
        "text": first[:200],
    }
    return values.get(name, first[:120])
