"""The matter as the agent sees it: documents (with text), who may read them, the database."""

from __future__ import annotations

import sqlite3
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from legal_agent.extract import extract_text


@dataclass(frozen=True)
class Document:
    path: str  # world-relative, posix
    title: str
    text: str | None  # None: no text layer (a scan)
    doc_type: str = "document"
    date: str = ""  # ISO, from the matter database when known
    contract_id: int | None = None
    counterparty: str = ""


@dataclass
class Permissions:
    """Document-level access from permissions.toml (format: docs/worlds.md in evalbot)."""

    user: str | None
    groups: frozenset[str] = frozenset()
    rules: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, world: Path, manifest: dict, user: str | None) -> Permissions:
        relative = manifest.get("permissions")
        if not relative or not (world / relative).is_file():
            return cls(user)
        with (world / relative).open("rb") as handle:
            data = tomllib.load(handle)
        groups = frozenset(data.get("users", {}).get(user or "", {}).get("groups", []))
        rules = {rule["path"]: rule for rule in data.get("restricted", [])}
        return cls(user, groups, rules)

    def may_read(self, path: str) -> bool:
        rule = self.rules.get(path)
        if rule is None:
            return True
        if self.user is not None and self.user in rule.get("allow_users", []):
            return True
        return bool(self.groups & set(rule.get("allow_groups", [])))

    def is_privileged(self, path: str) -> bool:
        return bool(self.rules.get(path, {}).get("privileged"))


class MatterDatabase:
    """Read access to the matter database, plus the few writes the agent makes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path if path is not None and path.is_file() else None

    def rows(self, query: str, params: tuple = ()) -> list[dict]:
        if self.path is None:
            return []
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        connection.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in connection.execute(query, params)]
        except sqlite3.Error:
            return []
        finally:
            connection.close()

    def insert(self, table: str, values: dict) -> int:
        if self.path is None:
            raise RuntimeError("the world has no database")
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        connection = sqlite3.connect(self.path)
        try:
            with connection:
                cursor = connection.execute(
                    f"INSERT INTO {table} ({columns}) VALUES ({marks})",
                    tuple(values.values()),
                )
            return int(cursor.lastrowid or 0)
        finally:
            connection.close()

    def value(self, key: str, default: str = "") -> str:
        found = self.rows("SELECT value FROM matter WHERE key = ?", (key,))
        return str(found[0]["value"]) if found else default


@dataclass
class Matter:
    world: Path
    manifest: dict
    user: str | None
    permissions: Permissions
    database: MatterDatabase
    documents: list[Document]

    @property
    def readable(self) -> list[Document]:
        return [d for d in self.documents if self.permissions.may_read(d.path)]

    def document(self, path: str) -> Document | None:
        return next((d for d in self.documents if d.path == path), None)


def load_matter(world: Path, user_override: str | None = None) -> Matter:
    manifest = _manifest(world)
    user = user_override or manifest.get("acting_user")
    database = MatterDatabase(world / manifest["database"] if manifest.get("database") else None)
    catalogue = {row["path"]: row for row in database.rows(CATALOGUE_QUERY)}
    documents = [
        _document(world, path, catalogue.get(path.relative_to(world).as_posix()))
        for path in sorted((world / "documents").rglob("*"))
        if path.is_file()
    ]
    permissions = Permissions.load(world, manifest, user)
    return Matter(world, manifest, user, permissions, database, documents)


CATALOGUE_QUERY = """
SELECT d.path, d.title, d.doc_type, d.doc_date, d.contract_id, p.name AS counterparty
FROM documents d
LEFT JOIN contracts c ON c.id = d.contract_id
LEFT JOIN parties p ON p.id = c.counterparty_id
"""


def _manifest(world: Path) -> dict:
    path = world / "world.toml"
    if not path.is_file():
        return {}
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _document(world: Path, path: Path, row: dict | None) -> Document:
    relative = path.relative_to(world).as_posix()
    text = extract_text(path)
    if row is None:
        title = _first_line(text) or path.stem.replace("-", " ")
        return Document(relative, title, text)
    return Document(
        relative,
        row["title"],
        text,
        doc_type=row["doc_type"],
        date=row["doc_date"] or "",
        contract_id=row["contract_id"],
        counterparty=row["counterparty"] or "",
    )


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip("# *").strip()
    return ""
