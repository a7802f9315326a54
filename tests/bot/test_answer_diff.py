"""What changed (bot/dashboard/answer_diff.py): the word diff rebuilds both answers and marks only
the changed words; grades that moved are told apart from level ones; a 10 MB answer is read only
up to the diff's limit, with its size for the note."""

from __future__ import annotations

from pathlib import Path

from bot.dashboard.answer_diff import DIFF_BYTES, grade_moves, read_answer, tokens, word_diff
from tests.support.experiments import make_spec, scored_run
from workflows.blobs.local import LocalBlobStore
from workflows.records import RunResult


def test_a_changed_word_is_one_deletion_and_one_insertion() -> None:
    before = "The notice period is 30 days, and renewal is automatic."
    after = "The notice period is 60 days, and renewal is automatic.\nSee clause 4."
    segments = word_diff(before, after)
    assert "".join(s.text for s in segments if s.op != "insert") == before
    assert "".join(s.text for s in segments if s.op != "delete") == after
    changed = [(s.op, s.text) for s in segments if s.op != "equal"]
    assert changed == [("delete", "30"), ("insert", "60"), ("insert", "\nSee clause 4.")]


def test_tokens_keep_every_character() -> None:
    text = "a<b>&c  \t d—é, 'x'"
    assert "".join(tokens(text)) == text


def test_identical_and_empty_answers() -> None:
    assert [s.op for s in word_diff("same words", "same words")] == ["equal"]
    assert word_diff("", "") == []
    assert [(s.op, s.text) for s in word_diff("", "new")] == [("insert", "new")]


def test_grades_that_moved_are_marked_with_their_direction() -> None:
    spec = make_spec(n_cases=1, trials=1)
    base = scored_run(spec, 0, "main", 0, {"accuracy": 1.0, "style": 0.5, "cites": 0.5, "old": 1.0})
    head = scored_run(spec, 0, "pr", 0, {"accuracy": 0.0, "style": 0.75, "cites": 0.5, "new": 1.0})
    moves = {m.criterion: m for m in grade_moves(base, head)}
    assert list(moves) == ["accuracy", "style", "cites", "old", "new"]
    assert {name: m.direction for name, m in moves.items()} == {
        "accuracy": "down", "style": "up", "cites": "level", "old": "changed", "new": "changed",
    }  # fmt: skip
    assert [name for name, m in moves.items() if m.moved] == ["accuracy", "style", "old", "new"]
    assert moves["style"].delta == 0.25
    assert [m.direction for m in grade_moves(base, None)] == ["changed"] * 4  # head has no run


def _with_answer(blobs: LocalBlobStore, run: RunResult, data: bytes) -> RunResult:
    staging = blobs.staging(run.run_id)
    (staging / "out").mkdir(parents=True)
    (staging / "out" / "answer.md").write_bytes(data)
    return run.model_copy(update={"outputs_ref": blobs.commit(run.run_id, staging)})


def test_a_10_mb_answer_is_cut_at_the_limit_with_its_size(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    spec = make_spec(n_cases=1, trials=1)
    big = b"word " * (2 * 1024 * 1024)  # 10 MiB on one line
    run = _with_answer(blobs, scored_run(spec, 0, "main", 0, {"a": 1.0}), big)
    answer = read_answer(blobs, run)
    assert answer.truncated and answer.size == len(big)
    assert len(answer.text.encode()) == DIFF_BYTES
    small = _with_answer(blobs, scored_run(spec, 0, "pr", 0, {"a": 1.0}), "é ok".encode())
    assert read_answer(blobs, small) == read_answer(blobs, small, limit=100)
    assert read_answer(blobs, small).text == "é ok" and not read_answer(blobs, small).truncated
    assert read_answer(blobs, scored_run(spec, 0, "pr", 0, {})).text == ""  # no outputs at all
