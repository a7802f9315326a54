"""The world `acme-acquisition`: its files, its permissions, and a database that agrees with the
documents except for the one deliberate contradiction (the Quanta licence's change of control).

Text is extracted here with python-docx and pypdf, independently of the sample agent."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import tomllib
from collections import Counter
from collections.abc import Iterator
from datetime import date
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from docx import Document as DocxDocument
from pypdf import PdfReader

from tests.conftest import REPO_ROOT
from workflows.catalog.loaders import load_world
from workflows.catalog.models import World

WORLD = REPO_ROOT / "worlds" / "acme-acquisition"
DELIBERATE = {(7, "change_of_control")}
MONTHS = "January February March April May June July August September October November December"
LAW = re.compile(
    r"governed by (?:the )?laws? of (?:the )?(?:State of )?"
    r"(England and Wales|Scotland|Ireland|Spain|Singapore|New York|Delaware|Netherlands)"
)


@cache
def text_of(relative: str) -> str:
    path = WORLD / relative
    if path.suffix == ".docx":
        raw = "\n".join(p.text for p in DocxDocument(str(path)).paragraphs)
    elif path.suffix == ".pdf":
        raw = "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    else:
        raw = path.read_text(encoding="utf-8")
    return " ".join(raw.replace("**", "").split())


def human(iso: str) -> str:
    day = date.fromisoformat(iso)
    return f"{day.day} {MONTHS.split()[day.month - 1]} {day.year}"


def money(amount: float) -> str:
    return f"{amount:,.0f}"


def rows(query: str) -> list[sqlite3.Row]:
    connection = sqlite3.connect(f"file:{WORLD / 'db/matter.sqlite'}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


def coc_category(text: str) -> str:
    """What the operative change-of-control clause does (definitions are skipped)."""
    clauses = [
        c
        for c in re.split(r"(?=\b\d{1,2}\.(?:\d{1,2})? )", text)
        if "change of control" in c.lower() and not re.match(r"\d+\.\d+ [\"“]", c)
    ]
    for clause in clauses:
        lowered = clause.lower()
        for category, words in (
            ("prepayment", ("due and payable", "prepay")),
            ("consent", ("consent",)),
            ("termination_right", ("terminate",)),
            ("payment", ("bonus",)),
            ("notice", ("notify",)),
        ):
            if any(w in lowered for w in words):
                return category
    return "none"


CONTRACTS = """
SELECT c.*, d.path, p.name AS counterparty, p.notice_address
FROM contracts c JOIN documents d ON d.id = c.document_id JOIN parties p ON p.id = c.counterparty_id
"""


def contract_text(contract_id: int) -> str:
    paths = [
        r["path"] for r in rows(f"SELECT path FROM documents WHERE contract_id = {contract_id}")
    ]
    return " ".join(text_of(p) for p in paths if not p.endswith(".png"))


def disagreements() -> Iterator[tuple[int, str]]:
    for row in rows(CONTRACTS):
        main, every = text_of(row["path"]), contract_text(row["id"])
        checks = {
            "counterparty": row["counterparty"] in main,
            "effective_date": human(row["effective_date"]) in main,
            "expiry_date": row["expiry_date"] is None or human(row["expiry_date"]) in every,
            "governing_law": (LAW.search(main) or [None, None])[1]
            == row["governing_law"].removeprefix("the "),
            "liability_cap": row["liability_cap"] is None or money(row["liability_cap"]) in main,
            "notice_address": row["notice_address"] in main,
            "change_of_control": coc_category(main) == row["change_of_control"],
            "coc_clause": row["coc_clause"] is None or f"{row['coc_clause']} " in main,
        }
        yield from ((row["id"], name) for name, ok in checks.items() if not ok)


def test_database_agrees_with_documents_except_the_deliberate_contradiction() -> None:
    assert set(disagreements()) == DELIBERATE


def test_the_contradiction_is_real() -> None:
    (quanta,) = rows(CONTRACTS + " WHERE c.id = 7")
    assert quanta["counterparty"] == "Quanta Systems Ltd"
    assert quanta["change_of_control"] == "none"
    assert "terminate automatically upon a change of control" in text_of(quanta["path"])
    assert coc_category(text_of(quanta["path"])) == "consent"


def test_financial_terms_and_key_dates_appear_in_their_documents() -> None:
    for term in rows("SELECT * FROM financial_terms"):
        assert money(term["amount"]) in contract_text(term["contract_id"]), dict(term)
    for key in rows("SELECT * FROM key_dates WHERE kind IN ('expiry', 'break', 'rent_review')"):
        assert human(key["date"]) in contract_text(key["contract_id"]), dict(key)


def test_documents_table_lists_exactly_the_files_with_their_privilege() -> None:
    listed = {r["path"]: r["privileged"] for r in rows("SELECT path, privileged FROM documents")}
    on_disk = {
        p.relative_to(WORLD).as_posix() for p in (WORLD / "documents").rglob("*") if p.is_file()
    }
    assert set(listed) == on_disk
    with (WORLD / "permissions.toml").open("rb") as handle:
        rules = tomllib.load(handle)["restricted"]
    privileged = {r["path"] for r in rules if r["privileged"]}
    assert {p for p, flag in listed.items() if flag} == privileged


@pytest.fixture(scope="module")
def world() -> World:
    return load_world(REPO_ROOT, "acme-acquisition")


def test_world_has_thirty_documents_in_several_formats(world: World) -> None:
    files = [p for p in (world.path / "documents").rglob("*") if p.is_file()]
    formats = Counter(p.suffix for p in files)
    assert len(files) >= 30
    assert formats[".md"] + formats[".txt"] >= 15
    assert formats[".docx"] >= 3 and formats[".pdf"] >= 3 and formats[".png"] == 1
    kinds = {r["doc_type"] for r in rows("SELECT doc_type FROM documents")}
    assert {"contract", "board_minutes", "advice", "letter", "email", "exhibit"} <= kinds
    types = {r["contract_type"] for r in rows("SELECT contract_type FROM contracts")}
    assert {"supply", "distribution", "licence", "nda", "lease", "employment", "finance"} <= types


def test_world_is_small_enough_to_copy_per_run(world: World) -> None:
    size = sum(p.stat().st_size for p in world.path.rglob("*") if p.is_file())
    assert size < 3 * 1024 * 1024


def test_scanned_exhibit_has_no_text_layer() -> None:
    data = (WORLD / "documents/exhibits/exhibit-c-northwind-signature-page.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"Northwind" not in data and len(data) > 20_000


def test_pdfs_keep_uncompressed_text_as_the_readme_promises() -> None:
    for path in (WORLD / "documents").rglob("*.pdf"):
        raw = path.read_bytes()
        assert b"/FlateDecode" not in raw, path.name
        assert re.search(rb"\((?:\\.|[^\\)])*governed by(?:\\.|[^\\)])*\)\s*Tj", raw), path.name


def _permissions() -> dict:
    with (WORLD / "permissions.toml").open("rb") as handle:
        return tomllib.load(handle)


def may_read(user: str, path: str) -> bool:
    data = _permissions()
    rule = next((r for r in data["restricted"] if r["path"] == path), None)
    if rule is None:
        return True
    groups = set(data["users"][user]["groups"])
    return user in rule["allow_users"] or bool(groups & set(rule["allow_groups"]))


def test_acting_user_cannot_read_board_minutes_or_counsel_memo(world: World) -> None:
    user = world.acting_user
    assert user in _permissions()["users"]
    privileged = [r["path"] for r in rows("SELECT path FROM documents WHERE privileged = 1")]
    assert any("board" in p for p in privileged) and any("advice" in p for p in privileged)
    assert not any(may_read(str(user), p) for p in privileged)
    assert all(may_read("rmorgan", p) for p in privileged)
    assert may_read(str(user), "documents/employment/employment-sarah-whitfield.md")
    assert not may_read("tnguyen", "documents/employment/employment-sarah-whitfield.md")


def test_restricted_rules_name_existing_documents_and_known_groups() -> None:
    data = _permissions()
    groups = set(data["groups"])
    for rule in data["restricted"]:
        assert (WORLD / rule["path"]).is_file(), rule["path"]
        assert set(rule["allow_groups"]) <= groups
    for user in data["users"].values():
        assert set(user["groups"]) <= groups


def test_world_version_is_stable_across_loads(world: World) -> None:
    assert load_world(REPO_ROOT, "acme-acquisition").version == world.version


def _load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / "generate" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_database_is_what_its_generator_writes(tmp_path: Path) -> None:
    rebuilt = _load_tool("acme_db.py").build(tmp_path / "matter.sqlite")
    assert rebuilt.read_bytes() == (WORLD / "db/matter.sqlite").read_bytes()


def test_committed_binary_documents_are_what_their_generator_writes(tmp_path: Path) -> None:
    written = _load_tool("acme_documents.py").write_all(tmp_path)
    assert len(written) >= 7
    for path in written:
        relative = path.relative_to(tmp_path)
        assert path.read_bytes() == (WORLD / relative).read_bytes(), relative
