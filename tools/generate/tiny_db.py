"""Write tests/fixtures/catalog/worlds/tiny/db/tiny.sqlite from the records below.

The generated file is committed; run this only when the records change:

    .venv/bin/python tools/generate/tiny_db.py
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

TARGET = Path(__file__).resolve().parents[2] / "tests/fixtures/catalog/worlds/tiny/db/tiny.sqlite"

SCHEMA = """
CREATE TABLE contracts (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    counterparty TEXT NOT NULL,
    document TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT,
    governing_law TEXT NOT NULL,
    annual_value REAL,
    currency TEXT
);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    document TEXT NOT NULL,
    status TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    note TEXT
);
"""

CONTRACTS = [
    (1, "Supply Agreement", "Harbor Grocers Inc.", "documents/supply-agreement.md",
     "2023-03-01", "2026-02-28", "England and Wales", None, "GBP"),
    (2, "Mutual Non-Disclosure Agreement", "Pinecrest Capital LLC", "documents/nda.md",
     "2024-01-10", "2026-01-10", "New York", None, None),
    (3, "Lease of Unit 4, Dockside Estate", "Dockside Estates Ltd",
     "documents/warehouse-lease.txt", "2022-07-01", "2027-06-30", "England and Wales",
     84000.0, "USD"),
]  # fmt: skip


def build(target: Path = TARGET) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    with sqlite3.connect(target) as db:
        db.executescript(SCHEMA)
        db.executemany("INSERT INTO contracts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", CONTRACTS)
    db.close()
    return target


if __name__ == "__main__":
    print(build())
