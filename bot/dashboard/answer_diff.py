"""What changed in one case between two arms (docs/dashboard.md, "What changed"): a word-level diff
of the two answers and the criteria whose grade moved.

The answers are read with one ranged read each, at most `DIFF_BYTES` (a 10 MB answer is cut there,
with a note); the diff runs difflib's SequenceMatcher over tokens (words, runs of white space,
single punctuation marks), so a changed word shows as one deletion and one insertion. The segments
are plain text: the template escapes them."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from workflows.blobs import BlobStore
from workflows.records import RunResult

DIFF_BYTES = 16 * 1024
ANSWER_FILES = ("out/answer.md", "out/answer.json")  # as bot/dashboard/run_outputs.py reads them
TOKEN = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)
Op = Literal["equal", "delete", "insert"]


@dataclass(frozen=True)
class Answer:
    text: str
    truncated: bool = False
    size: int | None = None  # bytes of the whole answer file, when it is known


@dataclass(frozen=True)
class Segment:
    op: Op
    text: str


@dataclass(frozen=True)
class GradeMove:
    """One criterion in the two runs: its grades, and whether (and which way) it moved."""

    criterion: str
    base: float | None
    head: float | None
    base_rationale: str
    head_rationale: str

    @property
    def delta(self) -> float | None:
        return None if self.base is None or self.head is None else self.head - self.base

    @property
    def direction(self) -> str:
        """'up', 'down', 'level', or 'changed' (graded in one run only)."""
        if self.delta is None:
            return "level" if self.base is None and self.head is None else "changed"
        return "up" if self.delta > 1e-9 else "down" if self.delta < -1e-9 else "level"

    @property
    def moved(self) -> bool:
        return self.direction != "level"


def read_answer(blobs: BlobStore, run: RunResult, limit: int = DIFF_BYTES) -> Answer:
    """The run's answer, at most `limit` bytes of it (never the whole of a large file)."""
    if not run.outputs_ref:
        return Answer("")
    for name in ANSWER_FILES:
        data = blobs.read_range(run.outputs_ref, name, 0, limit + 1)
        if data:
            size = blobs.size(run.outputs_ref, name) if len(data) > limit else len(data)
            return Answer(data[:limit].decode("utf-8", errors="replace"), len(data) > limit, size)
    return Answer("")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def word_diff(before: str, after: str) -> list[Segment]:
    """`before` → `after` as equal, deleted and inserted runs of tokens, neighbours merged."""
    a, b = tokens(before), tokens(after)
    segments: list[Segment] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "delete", "replace") and i2 > i1:
            _append(segments, "equal" if tag == "equal" else "delete", "".join(a[i1:i2]))
        if tag in ("insert", "replace") and j2 > j1:
            _append(segments, "insert", "".join(b[j1:j2]))
    return segments


def _append(segments: list[Segment], op: Op, text: str) -> None:
    if segments and segments[-1].op == op:
        segments[-1] = Segment(op, segments[-1].text + text)
    else:
        segments.append(Segment(op, text))


def grade_moves(base: RunResult | None, head: RunResult | None) -> list[GradeMove]:
    """Every criterion of either run, in rubric order, with both grades and rationales."""
    by_base = {c.name: c for c in base.criteria} if base else {}
    by_head = {c.name: c for c in head.criteria} if head else {}
    names = list(dict.fromkeys([*by_base, *by_head]))
    return [
        GradeMove(
            criterion=name,
            base=by_base[name].score if name in by_base else None,
            head=by_head[name].score if name in by_head else None,
            base_rationale=by_base[name].rationale if name in by_base else "",
            head_rationale=by_head[name].rationale if name in by_head else "",
        )
        for name in names
    ]
