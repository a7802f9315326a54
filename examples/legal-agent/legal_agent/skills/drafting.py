"""Work product written into the matter: consent-request letters, redlines, tracker updates."""

from __future__ import annotations

import re

from legal_agent.chunks import Chunk
from legal_agent.clauses import chunk_topics, human_date
from legal_agent.corpus import Document
from legal_agent.run import Answer, Run
from legal_agent.skills import lists
from legal_agent.skills.common import operative_coc
from legal_agent.tasks import Task

PARTY_ROW = """
SELECT p.id AS party_id, p.notice_address, c.id AS contract_id FROM documents d
JOIN contracts c ON c.id = d.contract_id JOIN parties p ON p.id = c.counterparty_id WHERE d.path = ?
"""


def letter(run: Run, task: Task) -> Answer:
    linked = run.link(task.prompt, run.contracts())
    result = Answer(text="")
    if not linked:
        result.text = "I could not tell which contract the letter is about."
        return result
    doc = linked[0]
    run.read_document(doc)
    clause, _ = operative_coc(run, doc)
    party = _party(run, doc)
    address, address_source = _notice_address(run, doc, party)
    body = _letter_text(run, doc, clause, address)
    lines = [
        f"I drafted a request for {doc.counterparty}'s consent under {doc.title.lower()} "
        f"{run.cite(result, doc)}."
    ]
    if clause:
        lines.append(
            f"- It relies on {clause.label}, which requires consent to a change of control."
        )
    lines.append(f"- Addressed to: {address} {run.cite(result, address_source)}")
    if task.save_path:
        _write(run, task.save_path, body)
        lines.append(f"- Saved in the matter as `{task.save_path}`.")
    if task.record and party:
        table, status = task.record
        row = {
            "contract_id": party["contract_id"],
            "counterparty_id": party["party_id"],
            "status": status,
            "letter_path": task.save_path,
            "note": f"Consent request drafted under {clause.label if clause else 'the contract'}",
        }
        run.matter.database.insert(table, row)
        run.trace.step("sql_insert", table=table, values=row)
        lines.append(f"- Recorded in the `{table}` table with status '{status}'.")
    result.text = "\n".join(lines) + "\n\n---\n\n" + body
    return result


def _party(run: Run, doc: Document) -> dict | None:
    rows = run.matter.database.rows(PARTY_ROW, (doc.path,))
    return rows[0] if rows else None


def _notice_address(run: Run, doc: Document, party: dict | None) -> tuple[str, Document]:
    """The address for notices: a newer notified address beats the contract's notices clause."""
    for later in run.related(doc):
        chunks = run.chunks(later)
        for position, chunk in enumerate(chunks):
            text = chunk.text.lower()
            if "notices" in text and ("now be sent" in text or "has moved" in text):
                run.read_document(later)
                if chunk.text.rstrip().endswith(":") and position + 1 < len(chunks):
                    return chunks[position + 1].text, later
    clause = run.best_in(
        doc, f"notices to {doc.counterparty}", lambda c: "notices" in chunk_topics(c.full_text)
    )
    if party and party.get("notice_address"):
        return f"{doc.counterparty}, {party['notice_address']}", doc
    return (clause.text if clause else doc.counterparty), doc


def _letter_text(run: Run, doc: Document, clause: Chunk | None, address: str) -> str:
    database = run.matter.database
    target = database.value("target", "the Company")
    transaction = database.value("transaction", f"the proposed acquisition of {target}")
    today = database.value("as_of")
    dated = f" dated {human_date(doc.date)}" if doc.date else ""
    ref = clause.label if clause else "the change-of-control provisions"
    quoted = f" That clause provides: “{clause.text}”" if clause else ""
    heading = (
        f"**{doc.title}{dated} between {target} and {doc.counterparty} "
        '(the "Agreement") — request for consent to a change of control**'
    )
    paragraphs = [
        f"1. We refer to {ref} of the Agreement.{quoted}",
        f'2. {_sentence_case(transaction)} is proposed (the "Transaction"). On completion the '
        f"Transaction will be a change of control of {target} for the purposes of {ref}.",
        f"3. We therefore request your consent to the change of control of {target} resulting "
        "from the Transaction. We would be grateful if you would confirm your consent by signing "
        "and returning the enclosed copy of this letter within 30 days.",
        "4. The Transaction is confidential. Please do not disclose this letter or its contents "
        "except to your professional advisers.",
    ]
    address_lines = [line.strip() for line in address.split(",")]
    blocks = [
        f"**{target}**",
        human_date(today) if today else "",
        "By courier and email",
        "\n".join(address_lines),
        "Dear Sirs,",
        heading,
        *paragraphs,
        "Yours faithfully,",
        f"for and on behalf of {target}",
    ]
    return "\n\n".join(blocks) + "\n"


def _sentence_case(text: str) -> str:
    """'Acquisition by X of Y' -> 'The acquisition by X of Y'."""
    if text[:1].isupper() and not text.lower().startswith("the "):
        return "The " + text[0].lower() + text[1:]
    return text


def redline(run: Run, task: Task) -> Answer:
    linked = run.link(task.prompt, run.contracts())
    result = Answer(text="")
    if not linked:
        result.text = "I could not tell which contract to mark up."
        return result
    doc = linked[0]
    run.read_document(doc)
    clause = _named_clause(run, doc, task) or operative_coc(run, doc)[0]
    if clause is None or not task.quoted:
        result.text = (
            "I need the clause and the new wording (in quotation marks) to prepare a redline."
        )
        return result
    new_text = task.quoted[0].strip()
    content = "\n".join(
        [
            f"# Redline — {doc.title}, {clause.label}",
            "",
            f"{doc.title}{_dated(doc)} with {doc.counterparty}. "
            "Deleted text is struck through; new text is in bold.",
            "",
            f"**{clause.clause}** ~~{clause.text}~~ **{new_text}**",
            "",
        ]
    )
    lines = [f"I prepared a redline of {clause.label} of the {doc.title} {run.cite(result, doc)}."]
    if task.save_path:
        _write(run, task.save_path, content)
        lines.append(f"Saved in the matter as `{task.save_path}`.")
    result.text = "\n".join(lines) + "\n\n" + content
    return result


def _dated(doc: Document) -> str:
    return f" dated {human_date(doc.date)}" if doc.date else ""


def _named_clause(run: Run, doc: Document, task: Task) -> Chunk | None:
    number = re.search(r"\bclause (\d+\.\d+)", task.prompt)
    if not number:
        return None
    return next((c for c in run.chunks(doc) if c.clause == number.group(1)), None)


def update(run: Run, task: Task) -> Answer:
    """Add the contracts that need consent and are missing from a Markdown tracker table."""
    path = run.paths.world / str(task.update_path)
    text = path.read_text(encoding="utf-8")
    run.trace.read(text)
    present = {
        line.split("|")[1].strip().lower()
        for line in text.splitlines()
        if line.startswith("|") and len(line.split("|")) > 2
    }
    consent_task = Task(
        "list", "which contracts require consent to a change of control", ("change_of_control",)
    )
    result = Answer(text="")
    new_rows = []
    for chunk in lists.find(run, consent_task):
        doc = chunk.doc
        if doc.counterparty.lower() in present:
            continue
        party = _party(run, doc)
        address = party["notice_address"] if party else ""
        requirement = " ".join(chunk.text.split()[:18]) + " …"
        dated = f", {human_date(doc.date)}" if doc.date else ""
        new_rows.append(
            f"| {doc.counterparty} | {doc.title}{dated} | {chunk.clause} | "
            f"{requirement} | {address} | To send |"
        )
        run.cite(result, doc)
    if new_rows:
        _write(run, str(task.update_path), _insert_rows(text, new_rows))
    names = ", ".join(row.split("|")[1].strip() for row in new_rows) or "none"
    result.text = (
        f"Updated `{task.update_path}`: added {len(new_rows)} row(s) ({names}).\n\n"
        + "\n".join(new_rows)
    )
    return result


def _insert_rows(text: str, rows: list[str]) -> str:
    lines = text.splitlines()
    last = max((i for i, line in enumerate(lines) if line.startswith("|")), default=len(lines) - 1)
    return "\n".join(lines[: last + 1] + rows + lines[last + 1 :]) + "\n"


def _write(run: Run, relative: str, content: str) -> None:
    target = run.paths.world / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    run.trace.wrote(content)
    run.trace.step("write_file", path=relative, bytes=len(content.encode()))
