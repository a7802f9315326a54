"""Pages of a transcript read by byte ranges (bot/dashboard/transcript_pages.py): pages join up
without a line lost or repeated, a 10 MB line is cut, and a filtered page stops at its budget."""

from __future__ import annotations

from pathlib import Path

from bot.dashboard.transcript_pages import read_page
from workflows.blobs.local import LocalBlobStore

NAME = "out/transcript.jsonl"


def stored(tmp_path: Path, body: bytes) -> tuple[LocalBlobStore, str]:
    blobs = LocalBlobStore(tmp_path / "blobs")
    staging = blobs.staging("run-1")
    (staging / "out").mkdir()
    (staging / "out" / "transcript.jsonl").write_bytes(body)
    return blobs, blobs.commit("run-1", staging)


def test_pages_join_up_across_a_huge_line_and_a_missing_final_newline(tmp_path: Path) -> None:
    huge = b'{"text": "' + b"x" * 10_000_000 + b'"}'
    lines = [b'{"step": %d}' % i for i in range(1, 6)] + [huge, b"", b'{"step": 8}']
    blobs, key = stored(tmp_path, b"\n".join(lines))  # no newline at the end
    seen, offset, number = [], 0, 1
    for _ in range(10):
        page = read_page(blobs, key, NAME, offset=offset, number=number, want=2, max_line=1000)
        seen += page.lines
        if page.next_offset is None:
            break
        offset, number = page.next_offset, page.next_number
    assert [line.number for line in seen] == [1, 2, 3, 4, 5, 6, 8]  # the blank line 7 skipped
    assert seen[5].size == len(huge) and len(seen[5].data) == 1000
    assert seen[6].data == b'{"step": 8}' and seen[6].offset == sum(len(x) + 1 for x in lines[:7])
    assert seen[1].offset == len(lines[0]) + 1


def test_a_filtered_page_stops_at_its_scan_budget_and_offers_to_continue(tmp_path: Path) -> None:
    body = b"".join(b'{"step": %d, "text": "%s"}\n' % (i, b"needle" if i == 900 else b"hay")
                    for i in range(1, 1001))  # fmt: skip
    blobs, key = stored(tmp_path, body)

    def keep(data: bytes) -> bool:
        return b"needle" in data

    first = read_page(blobs, key, NAME, keep=keep, scan_budget=4096)
    assert first.lines == [] and first.next_offset is not None and first.scanned < len(body) / 4
    rest = read_page(
        blobs, key, NAME, offset=first.next_offset, number=first.next_number, keep=keep
    )
    assert [line.number for line in rest.lines] == [900] and rest.next_offset is None
    assert read_page(blobs, key, NAME, offset=len(body) + 5).lines == []
