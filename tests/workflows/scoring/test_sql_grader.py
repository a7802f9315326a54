from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from workflows.scoring import RubricError

from .support import RunDir, grade_one, make_case, score_of

DB = "db/matter.sqlite"
NDA = "WHERE document = 'documents/nda.md'"
REVIEWED = "SELECT count(*) FROM reviews WHERE status = 'reviewed'"


def modify_copy(run: RunDir, world_dir: Path, *statements: str) -> Path:
    """What an agent does: change the world's database; the collect stage keeps the copy."""
    copy = run.change(DB, b"")
    shutil.copyfile(world_dir / DB, copy)
    with sqlite3.connect(copy) as db:
        for statement in statements:
            db.execute(statement)
    return copy


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_reads_the_database_as_the_run_left_it(run: RunDir, world_dir: Path) -> None:
    before = digest(world_dir / DB)
    assert score_of(run, "sql_query", {"query": REVIEWED, "expected": 1}) == 0.0
    modify_copy(run, world_dir, "UPDATE reviews SET status = 'reviewed'")
    assert score_of(run, "sql_query", {"query": REVIEWED, "expected": 1}) == 1.0
    assert digest(world_dir / DB) == before
    assert sorted(p.name for p in (world_dir / "db").iterdir()) == ["matter.sqlite"]


def test_reads_uncheckpointed_wal_changes_without_touching_the_world(
    run: RunDir, world_dir: Path
) -> None:
    copy = run.change(DB, b"")
    shutil.copyfile(world_dir / DB, copy)
    writer = sqlite3.connect(copy)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO reviews VALUES ('documents/lease.md', 'reviewed')")
        writer.commit()
        assert copy.with_name("matter.sqlite-wal").stat().st_size > 0
        score = score_of(run, "sql_query", {"query": REVIEWED, "expected": 1})
    finally:
        writer.close()
    assert score == 1.0
    assert sorted(p.name for p in (world_dir / "db").iterdir()) == ["matter.sqlite"]


@pytest.mark.parametrize(
    ("query", "expected", "extra", "score"),
    [
        (f"SELECT document, status FROM reviews {NDA}", [["documents/nda.md", "PENDING"]], {}, 1.0),
        (f"SELECT document, status FROM reviews {NDA}", ["documents/nda.md", "pending"], {}, 1.0),
        ("SELECT document, status FROM reviews", ["documents/nda.md", "pending"], {}, 0.0),
        ("SELECT document FROM reviews ORDER BY document", ["a.md", "documents/nda.md"], {}, 1.0),
        ("SELECT document FROM reviews ORDER BY document", ["documents/nda.md", "a.md"], {}, 0.0),
        (
            "SELECT document FROM reviews ORDER BY document",
            ["documents/nda.md", "a.md"],
            {"ordered": False},
            1.0,
        ),
        ("SELECT count(*) FROM reviews", 2.0, {}, 1.0),
        ("SELECT count(*) FROM reviews", [[2]], {}, 1.0),
        ("SELECT * FROM reviews WHERE 0", [], {}, 1.0),
        ("SELECT count(*) FROM reviews", 3, {}, 0.0),
    ],
)
def test_result_shapes(
    run: RunDir, world_dir: Path, query: str, expected: Any, extra: dict[str, Any], score: float
) -> None:
    modify_copy(run, world_dir, "INSERT INTO reviews VALUES ('a.md', 'new')")
    assert score_of(run, "sql_query", {"query": query, "expected": expected, **extra}) == score


def test_sql_error_is_a_rubric_error(run: RunDir) -> None:
    case = make_case("sql_query", {"query": "SELECT nope FROM missing", "expected": 1})
    with pytest.raises(RubricError, match=r"criterion 'check'.*SQL error: no such table"):
        grade_one(case, run)


def test_writes_are_refused(run: RunDir, world_dir: Path) -> None:
    case = make_case("sql_query", {"query": "DELETE FROM reviews", "expected": []})
    with pytest.raises(RubricError, match="SQL error"):
        grade_one(case, run)
    assert sqlite3.connect(world_dir / DB).execute("SELECT count(*) FROM reviews").fetchone() == (
        1,
    )


def test_slow_query_hits_the_time_limit(run: RunDir) -> None:
    endless = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    )
    case = make_case("sql_query", {"query": endless, "expected": 1, "timeout_s": 0.2})
    with pytest.raises(RubricError, match=r"longer than 0.2s"):
        grade_one(case, run)


def test_deleted_database_fails_the_agent(run: RunDir) -> None:
    run.delete(DB)
    score = grade_one(make_case("sql_query", {"query": REVIEWED, "expected": 0}), run)
    assert score.score == 0.0 and "deleted the database" in score.rationale


def test_database_param_and_missing_database(run: RunDir, world_dir: Path) -> None:
    other = run.change("db/other.sqlite", b"")
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (7)")
    params = {"query": "SELECT x FROM t", "expected": 7, "database": "db/other.sqlite"}
    assert score_of(run, "sql_query", params) == 1.0
    params["database"] = "db/none.sqlite"
    with pytest.raises(RubricError, match="does not exist"):
        score_of(run, "sql_query", params)
