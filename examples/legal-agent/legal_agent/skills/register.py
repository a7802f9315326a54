"""The matter database as a register of contracts: check it against the documents, and answer
date questions from it."""

from __future__ import annotations

import json
import re

from legal_agent.clauses import human_date
from legal_agent.run import Answer, Run
from legal_agent.skills.common import COC_WORDS, operative_coc, quote
from legal_agent.tasks import Task

CONTRACT_ROWS = """
SELECT c.id, c.title, c.change_of_control, c.coc_clause, c.expiry_date, d.path,
       p.name AS counterparty
FROM contracts c JOIN documents d ON d.id = c.document_id JOIN parties p ON p.id = c.counterparty_id
ORDER BY c.id
"""


def compare(run: Run, task: Task) -> Answer:
    """Check each contract's change-of-control entry against the contract itself."""
    rows = run.matter.database.rows(CONTRACT_ROWS)
    run.trace.step("sql", query="contracts register", rows=len(rows))
    readable = {d.path: d for d in run.readable}
    result = Answer(text="")
    findings, checked = [], 0
    for row in rows:
        doc = readable.get(row["path"])
        if doc is None or not doc.text:
            continue
        checked += 1
        run.read_document(doc)
        chunk, category = operative_coc(run, doc)
        if category != row["change_of_control"]:
            where = chunk.label if chunk else "no clause"
            findings.append(
                f"- **{row['title']}** with {row['counterparty']}: the database records "
                f"change_of_control = '{row['change_of_control']}', but the contract ({where}) "
                f"provides that {COC_WORDS.get(category, category)}: "
                f"{quote(chunk) if chunk else ''} {run.cite(result, doc)}"
            )
    lines = [f"I checked {checked} contracts in the matter database against their documents."]
    lines += ["", *findings] if findings else ["", "Every entry agrees with its contract."]
    result.text = "\n".join(lines)
    result.sources.append(str(run.matter.manifest.get("database", "database")))
    return result


def expiring(run: Run, task: Task) -> Answer:
    """Contracts expiring in the year the question names, from the register."""
    year = re.search(r"\b(20\d\d)\b", task.prompt)
    rows = [r for r in run.matter.database.rows(CONTRACT_ROWS) if r["expiry_date"]]
    readable = {d.path for d in run.readable}
    if year:
        rows = [r for r in rows if r["expiry_date"].startswith(year.group(1))]
    rows = sorted((r for r in rows if r["path"] in readable), key=lambda r: r["expiry_date"])
    run.trace.step(
        "sql", query="expiry dates", year=year.group(1) if year else None, rows=len(rows)
    )
    result = Answer(text="")
    contracts = []
    lines = [f"{len(rows)} contract(s) expire{' in ' + year.group(1) if year else ''}:", ""]
    for row in rows:
        doc = run.matter.document(row["path"])
        marker = run.cite(result, doc) if doc else ""
        contracts.append(
            {
                "counterparty": row["counterparty"],
                "title": row["title"],
                "expiry_date": row["expiry_date"],
                "document": row["path"],
            }
        )
        when = human_date(row["expiry_date"])
        lines.append(f"- {when}: {row['title']} with {row['counterparty']} {marker}")
    result.data = {"contracts": contracts, "count": len(contracts)}
    result.text = "\n".join(lines) + "\n\n```json\n" + json.dumps(result.data, indent=2) + "\n```"
    result.sources.append(str(run.matter.manifest.get("database", "database")))
    return result
