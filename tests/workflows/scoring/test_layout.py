from __future__ import annotations

import os
from pathlib import Path

import pytest

from workflows.scoring import OutputsLayoutError, load_run_outputs
from workflows.scoring.outputs_layout import safe_relative

from .support import RunDir


def test_answer_prefers_markdown_then_json_then_empty(run: RunDir) -> None:
    assert run.load().outputs.answer == ""
    run.out("answer.json", {"a": 1})
    assert run.load().outputs.answer == '{"a": 1}'
    run.out("answer.md", "# Answer")
    assert run.load().outputs.answer == "# Answer"


def test_world_after_overlays_changes_and_deletions(run: RunDir) -> None:
    run.change("documents/lease.md", "Annual rent: $90,000.\n")
    run.change("drafts/new.md", "draft")
    run.delete("documents/nda.md")
    world = run.load().world
    assert world.database == "db/matter.sqlite"
    assert world.was_changed("documents/lease.md")
    assert world.was_created("drafts/new.md") and not world.was_changed("drafts/new.md")
    assert world.was_deleted("documents/nda.md") and world.after("documents/nda.md") is None
    assert world.before("documents/nda.md") is not None
    after = world.after("documents/lease.md")
    assert after is not None and after.read_text() == "Annual rent: $90,000.\n"


def test_a_stored_copy_with_identical_bytes_is_not_a_change(run: RunDir, world_dir: Path) -> None:
    run.change("documents/lease.md", (world_dir / "documents" / "lease.md").read_bytes())
    assert not run.load().world.was_changed("documents/lease.md")


def test_malformed_deletion_list_is_a_clear_error(run: RunDir) -> None:
    (run.root / "world_deleted.json").write_text('{"not": "a list"}')
    with pytest.raises(OutputsLayoutError, match=r"world_deleted\.json is not a JSON list"):
        run.load()


def test_deletion_list_cannot_escape_the_world(run: RunDir) -> None:
    run.delete("../etc/passwd")
    with pytest.raises(OutputsLayoutError, match="relative path"):
        run.load()


def test_missing_outputs_folder_is_a_clear_error(tmp_path: Path, world_dir: Path) -> None:
    with pytest.raises(OutputsLayoutError, match="does not exist"):
        load_run_outputs(tmp_path / "nowhere", world_dir)


def test_symlink_out_of_the_outputs_is_not_followed(run: RunDir, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, run.root / "out" / "answer.md")
    assert run.load().outputs.answer == ""


@pytest.mark.parametrize("bad", ["", "/etc/passwd", "../x", "a/../../x", "."])
def test_safe_relative_rejects_paths_outside(bad: str) -> None:
    with pytest.raises(ValueError, match="relative path"):
        safe_relative(bad)


def test_safe_relative_normalises() -> None:
    assert safe_relative("./a//b.md") == "a/b.md"
    assert safe_relative("a\\b.md") == "a/b.md"
