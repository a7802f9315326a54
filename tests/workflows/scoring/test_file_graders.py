from __future__ import annotations

from pathlib import Path

from .support import RunDir, grade_one, make_case, score_of

DRAFT = "drafts/consent.md"


def test_file_created_with_contents(run: RunDir) -> None:
    run.change(DRAFT, "Dear Harbor Grocers, we request your CONSENT.")
    params = {"path": DRAFT, "contains": ["harbor grocers", "consent"]}
    assert score_of(run, "file_created", params) == 1.0


def test_file_created_fails_when_absent_or_lacking_contents(run: RunDir) -> None:
    assert score_of(run, "file_created", {"path": DRAFT}) == 0.0
    run.change(DRAFT, "Dear Harbor Grocers.")
    score = grade_one(make_case("file_created", {"path": DRAFT, "contains": ["consent"]}), run)
    assert score.score == 0.0 and "'consent'" in score.rationale


def test_file_created_fails_for_a_file_that_already_existed(run: RunDir) -> None:
    run.change("documents/lease.md", "rewritten")
    assert score_of(run, "file_created", {"path": "documents/lease.md"}) == 0.0


def test_file_created_then_deleted_is_not_created(run: RunDir) -> None:
    run.change(DRAFT, "draft")
    run.delete(DRAFT)
    assert score_of(run, "file_created", {"path": DRAFT}) == 0.0


def test_file_changed(run: RunDir) -> None:
    params = {"path": "documents/lease.md", "contains": ["$90,000"]}
    assert score_of(run, "file_changed", params) == 0.0  # untouched
    run.change("documents/lease.md", "Annual rent: $90,000.\n")
    assert score_of(run, "file_changed", params) == 1.0


def test_file_changed_rejects_same_bytes_new_files_and_deletions(
    run: RunDir, world_dir: Path
) -> None:
    original = (world_dir / "documents" / "lease.md").read_bytes()
    run.change("documents/lease.md", original)
    assert score_of(run, "file_changed", {"path": "documents/lease.md"}) == 0.0
    run.change(DRAFT, "new")
    assert score_of(run, "file_changed", {"path": DRAFT}) == 0.0
    run.delete("documents/nda.md")
    score = grade_one(make_case("file_changed", {"path": "documents/nda.md"}), run)
    assert score.score == 0.0 and "deleted" in score.rationale
