"""Unit tests of the sample legal agent's parts, in-process."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from docx import Document as DocxDocument
from pypdf import PdfReader

from tests.examples.conftest import ACME

pytestmark = pytest.mark.usefixtures("legal_agent_package")


def _words(text: str) -> list[str]:
    return text.replace("“", '"').replace("”", '"').split()


# --- extraction -----------------------------------------------------------------------------


def test_docx_text_matches_python_docx() -> None:
    from legal_agent.extract import extract_text

    path = ACME / "documents/contracts/supply-kestrel-automotive.docx"
    ours = extract_text(path)
    theirs = "\n".join(p.text for p in DocxDocument(str(path)).paragraphs if p.text.strip())
    assert ours is not None and _words(ours) == _words(theirs)
    assert "18.2 The Supplier shall not undergo a Change of Control" in ours


@pytest.mark.parametrize(
    "name",
    [
        "distribution-lumen-trading.pdf",
        "lease-rotterdam-depot.pdf",
        "credit-agreement-northgate.pdf",
    ],
)
def test_pdf_text_has_the_same_words_as_pypdf(name: str) -> None:
    from legal_agent.extract import extract_text

    path = ACME / "documents/contracts" / name
    ours = extract_text(path)
    theirs = "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    assert ours is not None and _words(ours) == _words(theirs)


def test_pdf_escapes_and_winansi_are_decoded() -> None:
    from legal_agent.extract import extract_text, pdf_text

    rotterdam = extract_text(ACME / "documents/contracts/lease-rotterdam-depot.pdf") or ""
    assert "€150,000" in rotterdam and '(the "Premises")' in rotterdam
    stream = b"<< /Length 44 >>\nstream\nBT (a \\(b\\) \\243 5) Tj T* (next) Tj ET\nendstream"
    assert pdf_text(stream) == "a (b) £ 5 next"


def test_a_scan_has_no_text() -> None:
    from legal_agent.extract import extract_text

    assert extract_text(ACME / "documents/exhibits/exhibit-c-northwind-signature-page.png") is None


# --- chunks ---------------------------------------------------------------------------------


def _matter():
    from legal_agent.corpus import load_matter

    return load_matter(ACME)


def test_clauses_keep_their_numbers_and_headings() -> None:
    from legal_agent.chunks import split

    matter = _matter()
    kestrel = split(matter.document("documents/contracts/supply-kestrel-automotive.docx"))
    clause = next(c for c in kestrel if c.clause == "18.2")
    assert clause.heading == "Assignment and change of control"
    assert clause.text.startswith("The Supplier shall not undergo a Change of Control")
    polaris = split(matter.document("documents/contracts/supply-polaris-plastics.txt"))
    numbers = [c.clause for c in polaris if c.clause]
    assert numbers[:3] == ["1.1", "1.2", "2.1"] and "30" not in numbers
    assert "within 30 days of written notice" in next(c.text for c in polaris if c.clause == "7.2")


def test_an_address_block_reads_as_one_line() -> None:
    from legal_agent.chunks import split

    email = _matter().document("documents/correspondence/email-kestrel-2024-04-02.txt")
    texts = [c.text for c in split(email)]
    address = "Kestrel Automotive GmbH, Legal Department, Heilbronner Straße 150, 70191 Stuttgart"
    assert f"{address}, Germany" in texts


# --- retrieval ------------------------------------------------------------------------------


def _chunks(*texts: str):
    from legal_agent.chunks import Chunk
    from legal_agent.corpus import Document

    return [
        Chunk(Document(f"documents/d{i}.md", f"D{i}", t), 0, "1.1", "", t)
        for i, t in enumerate(texts)
    ]


def test_bm25_weighs_rare_words_where_keyword_counts_do_not() -> None:
    from legal_agent.retrieval import BM25Retriever, KeywordRetriever, search

    chunks = _chunks(
        "Beta shall deliver to Beta's plants; Beta pays Beta's carriers; Beta invoices monthly.",
        "A change of control needs consent.",
        "Beta keeps records.",
        "Beta supplies enclosures.",
    )
    query = "Beta change of control"
    keyword = search(KeywordRetriever(chunks), query, 1, random.Random(0))
    bm25 = search(BM25Retriever(chunks), query, 1, random.Random(0))
    assert keyword[0].chunk is chunks[0]
    assert bm25[0].chunk is chunks[1]


def test_spread_returns_every_document_not_a_global_top_k() -> None:
    from legal_agent.retrieval import BM25Retriever, search

    chunks = _chunks(*[f"governed by the laws of place{i}" for i in range(10)])
    assert len(search(BM25Retriever(chunks), "governed by laws", 3, random.Random(0))) == 3
    spread = search(BM25Retriever(chunks), "governed by laws", 3, random.Random(0), spread=True)
    assert len({hit.chunk.path for hit in spread}) == 10


def test_ties_are_broken_by_the_seed() -> None:
    from legal_agent.retrieval import KeywordRetriever, search

    chunks = _chunks(*["notice of termination"] * 8)
    orders = {
        tuple(h.chunk.path for h in search(KeywordRetriever(chunks), "notice", 8, random.Random(s)))
        for s in range(5)
    }
    assert len(orders) > 1


# --- clause values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("On a change of control the Lender may declare all Loans due and payable.", "prepayment"),
        (
            "Beta shall not undergo a change of control without Kestrel's prior written consent.",
            "consent",
        ),
        (
            "If the Customer undergoes a change of control, Swift may terminate.",
            "termination_right",
        ),
        ("On a change of control the Company shall pay a retention bonus.", "payment"),
        ("Beta shall notify the Distributor within 30 days after a change of control.", "notice"),
        ("Neither party may assign this Agreement.", "none"),
    ],
)
def test_change_of_control_categories(text: str, category: str) -> None:
    from legal_agent.clauses import coc_category

    assert coc_category(text) == category


def test_values_in_clauses() -> None:
    from datetime import date

    from legal_agent import clauses

    assert clauses.governing_law("governed by the laws of the State of New York") == "New York"
    assert clauses.governing_law("governed by the law of Scotland") == "Scotland"
    assert clauses.governing_law("governed by the laws of the Netherlands") == "the Netherlands"
    assert clauses.amounts("capped at €2,500,000 and S$1,000,000") == [
        ("€2,500,000", 2500000.0, "EUR"),
        ("S$1,000,000", 1000000.0, "SGD"),
    ]
    assert clauses.dates("from 1 July 2022 until 30 June 2027") == [
        date(2022, 7, 1),
        date(2027, 6, 30),
    ]
    assert clauses.notice_period("by giving at least six months' written notice") == "six months"
    assert clauses.renews_automatically("It renews automatically for one year")
    assert not clauses.renews_automatically("there is no automatic renewal")
    assert clauses.is_exclusive("its exclusive distributor in Spain")
    assert not clauses.is_exclusive("a non-exclusive distributor")


def test_question_topics_match_words_not_fragments() -> None:
    from legal_agent.clauses import question_topics

    assert question_topics("What rent is payable now?") == ["rent"]
    assert "salary" in question_topics("What is the CFO's salary?")
    assert question_topics(
        "Which law governs the licence, and which courts have jurisdiction?"
    ) == ["governing_law"]


# --- permissions, tasks, config -------------------------------------------------------------


def test_acting_user_cannot_read_privileged_documents() -> None:
    matter = _matter()
    readable = {d.path for d in matter.readable}
    assert matter.user == "jlee"
    assert "documents/advice/counsel-memo-change-of-control.md" not in readable
    assert "documents/board/board-minutes-beta-2024-02-20.md" not in readable
    assert "documents/employment/employment-sarah-whitfield.md" in readable
    assert len(readable) == len(matter.documents) - 3


def test_another_user_sees_other_documents() -> None:
    from legal_agent.corpus import load_matter

    paralegal = load_matter(ACME, user_override="tnguyen")
    readable = {d.path for d in paralegal.readable}
    assert "documents/employment/employment-sarah-whitfield.md" not in readable


@pytest.mark.parametrize(
    ("prompt", "skill"),
    [
        ("What is the cap on liability under the Kestrel supply agreement?", "lookup"),
        ("Which contracts grant exclusivity?", "list"),
        ("Tabulate the governing law of every contract as a Markdown table.", "table"),
        ("Summarise the Orion relationship.", "summary"),
        ("Check the database entries against the contracts: which record is wrong?", "compare"),
        ("Draft a letter to Orion requesting consent and save it as drafts/x.md.", "letter"),
        (
            'Prepare a redline of clause 14.3 replacing it with "The Licensor may terminate."',
            "redline",
        ),
        ("Update workproduct/consent-tracker.md with any missing contract.", "update"),
    ],
)
def test_prompts_choose_a_skill(prompt: str, skill: str) -> None:
    from legal_agent.tasks import read_task

    assert read_task(prompt, {"workproduct/consent-tracker.md"}).skill == skill


def test_a_task_reads_paths_records_quotes_and_columns() -> None:
    from legal_agent.tasks import read_task

    task = read_task(
        "Draft the request, save it as drafts/orion.md, and record it in the matter database's "
        "consent_requests table with status 'drafted'.",
        set(),
    )
    assert (task.save_path, task.record) == ("drafts/orion.md", ("consent_requests", "drafted"))
    table = read_task(
        "Prepare a CSV of every contract with the columns document, counterparty and "
        "notice_period, and save it as workproduct/t.csv.",
        set(),
    )
    assert table.columns == ("document", "counterparty", "notice_period") and table.wants_csv
    assert read_task('Replace it with "The Licensor may terminate on notice."', set()).quoted == (
        "The Licensor may terminate on notice.",
    )


def test_arm_config_is_validated_and_has_defaults() -> None:
    from legal_agent.config import DEFAULT_RETRIEVER, PRICES, Settings

    assert Settings.from_arm_config({}).retriever == DEFAULT_RETRIEVER
    settings = Settings.from_arm_config({"retriever": "BM25", "top_k": "9", "model": "gpt-4o"})
    assert (settings.retriever, settings.top_k, settings.price) == ("bm25", 9, PRICES["gpt-4o"])
    assert Settings.from_arm_config({"model": "gpt-4o"}).slip_rate < Settings().slip_rate
    for bad in ({"retriever": "grep"}, {"top_k": "0"}, {"permissions": "some"}):
        with pytest.raises(ValueError):
            Settings.from_arm_config(bad)


def test_slips_depend_on_the_seed_only() -> None:
    from legal_agent.run import Slips

    draws = [Slips.draw(seed, 0.5).cite_titles for seed in range(40)]
    assert any(draws) and not all(draws)
    assert draws == [Slips.draw(seed, 0.5).cite_titles for seed in range(40)]
    assert not any(Slips.draw(seed, 0.0).cite_titles for seed in range(40))


def test_trace_counts_tokens_and_prices_them(tmp_path: Path) -> None:
    from legal_agent.trace import Trace, token_count

    trace = Trace(tmp_path / "t.jsonl", (1.0, 2.0))
    trace.read("x" * 4000)
    trace.wrote("y" * 400)
    trace.close()
    assert token_count("abcde") == 2
    assert trace.usage() == {"input_tokens": 1000, "output_tokens": 100, "cost_usd": 0.0012}
