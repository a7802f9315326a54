"""Read the prompt: which skill answers it, about what, and what it must produce."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from legal_agent.clauses import question_topics

PATH = re.compile(r"\b((?:[\w.-]+/)+[\w.-]+\.(?:md|txt|csv|json))\b")
SAVE = re.compile(r"\b(?:save|store|write|put)\b[^.]*?\b((?:[\w.-]+/)+[\w.-]+\.(?:md|txt|csv))\b")
QUOTED = re.compile(r"[\"“]([^\"”]{12,})[\"”]")
RECORD = re.compile(r"\b(\w+) table\b(?:[^.]*?\bstatus '?\"?(\w+))?", re.I)
LATEST = ("amendment", "correspondence", "currently", "today", "now ", "latest", "later")


@dataclass(frozen=True)
class Task:
    skill: str  # lookup | list | table | summary | compare | letter | redline | update
    prompt: str
    topics: tuple[str, ...]
    save_path: str | None = None
    update_path: str | None = None
    wants_json: bool = False
    wants_csv: bool = False
    quoted: tuple[str, ...] = ()
    record: tuple[str, str] | None = None  # (table, status)
    latest: bool = False
    columns: tuple[str, ...] = field(default_factory=tuple)


def read_task(prompt: str, existing: set[str]) -> Task:
    """`existing`: world-relative paths of files the world already holds."""
    lowered = prompt.lower()
    save = SAVE.search(prompt)
    mentioned = [p for p in PATH.findall(prompt) if p in existing]
    record = RECORD.search(prompt) if "database" in lowered else None
    return Task(
        skill=_skill(lowered, bool(mentioned)),
        prompt=prompt,
        topics=tuple(question_topics(prompt)),
        save_path=save.group(1) if save and save.group(1) not in existing else None,
        update_path=mentioned[0] if mentioned else None,
        wants_json="answer.json" in lowered,
        wants_csv="csv" in lowered,
        quoted=tuple(QUOTED.findall(prompt)),
        record=(record.group(1), (record.group(2) or "drafted").lower()) if record else None,
        latest=any(word in lowered for word in LATEST),
        columns=_columns(prompt),
    )


def _skill(lowered: str, mentions_existing_file: bool) -> str:
    if "redline" in lowered:
        return "redline"
    if mentions_existing_file and any(w in lowered for w in ("update", "add ", "missing")):
        return "update"
    if "draft" in lowered and any(w in lowered for w in ("letter", "request", "notice")):
        return "letter"
    if ("database" in lowered or "register" in lowered) and any(
        w in lowered for w in ("check", "against", "compare", "wrong", "discrepan")
    ):
        return "compare"
    if any(w in lowered for w in ("summarise", "summarize", "summary", "overview")):
        return "summary"
    if any(w in lowered for w in ("csv", "tabulate", "table", "answer.json")) and any(
        w in lowered for w in ("every", "each", "all ", "list")
    ):
        return "table"
    if re.match(r"\s*(which|list|what are the|who are)\b", lowered):
        return "list"
    return "lookup"


def _columns(prompt: str) -> tuple[str, ...]:
    found = re.search(r"\bcolumns?\s*:?\s*(.+?)(?:[,;]? and save\b|[.;]|$)", prompt, re.I)
    if not found:
        return ()
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", found.group(1))
    return tuple(p.strip(" `'\"") for p in parts if p.strip(" `'\""))
