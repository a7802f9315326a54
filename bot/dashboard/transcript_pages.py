"""A page of a transcript's lines, read from the blob store by byte ranges (docs/store.md, "Blobs").

A page starts at a byte offset (0, or the `next_offset` of the page before) and holds at most
`want` lines that `keep` accepts; it never reads more than `scan_budget` bytes, so a search over a
1 GiB transcript answers at once with "continue from here" instead of reading it all. A line longer
than `max_line` keeps its first `max_line` bytes (and its full size); the rest is skipped in chunks,
never held in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from workflows.blobs import BlobStore

CHUNK = 256 * 1024
MAX_LINE = 256 * 1024
SCAN_BUDGET = 32 * 1024 * 1024


@dataclass(frozen=True)
class Line:
    number: int  # from 1
    offset: int
    size: int  # bytes, without the newline
    data: bytes  # the first max_line bytes


@dataclass
class Page:
    lines: list[Line] = field(default_factory=list)
    next_offset: int | None = None  # None: the end of the file was reached
    next_number: int = 1
    scanned: int = 0  # bytes of the file this page went through


class _Cursor:
    """Reads `key/name` forward from `offset` in chunks."""

    def __init__(self, blobs: BlobStore, key: str, name: str, offset: int) -> None:
        self.blobs, self.key, self.name = blobs, key, name
        self.offset = offset  # of buf[0]
        self.buf = b""
        self.eof = False
        self.read = 0

    def fill(self) -> bool:
        """Append a chunk to the buffer; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.blobs.read_range(self.key, self.name, self.offset + len(self.buf), CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.read += len(chunk)
        self.buf += chunk
        return True

    def next_line(self, max_line: int) -> tuple[int, int, bytes] | None:
        """(offset, size, first bytes) of the next line, or None at the end of the file."""
        start = self.offset
        while (newline := self.buf.find(b"\n")) < 0:
            if len(self.buf) > max_line:
                return self._long_line(start, max_line)
            if not self.fill():
                if not self.buf:
                    return None
                data, self.buf = self.buf, b""
                self.offset += len(data)
                return start, len(data), data
        data = self.buf[:newline]
        self.buf = self.buf[newline + 1 :]
        self.offset += newline + 1
        return start, len(data), data

    def _long_line(self, start: int, max_line: int) -> tuple[int, int, bytes]:
        head = self.buf[:max_line]
        size = len(self.buf)
        self.buf = b""
        while True:
            self.offset = start + size
            if not self.fill():
                return start, size, head
            newline = self.buf.find(b"\n")
            if newline >= 0:
                size += newline
                self.offset = start + size + 1
                self.buf = self.buf[newline + 1 :]
                return start, size, head
            size += len(self.buf)
            self.buf = b""


def read_page(
    blobs: BlobStore,
    key: str,
    name: str,
    *,
    offset: int = 0,
    number: int = 1,
    want: int = 200,
    keep: Callable[[bytes], bool] = lambda _data: True,
    max_line: int = MAX_LINE,
    scan_budget: int = SCAN_BUDGET,
) -> Page:
    """Up to `want` kept lines from `offset` (line `number` there), reading ≤ ~scan_budget bytes."""
    start = max(0, offset)
    cursor = _Cursor(blobs, key, name, start)
    page = Page(next_number=number)
    while len(page.lines) < want and cursor.offset - start < scan_budget:
        found = cursor.next_line(max_line)
        if found is None:
            page.scanned = cursor.offset - start
            page.next_offset = None
            return page
        at, size, data = found
        if data.strip() and keep(data):
            page.lines.append(Line(page.next_number, at, size, data))
        page.next_number += 1
    page.scanned = cursor.offset - start
    page.next_offset = cursor.offset if not (cursor.eof and not cursor.buf) else None
    if page.next_offset is not None and not cursor.buf and _at_end(blobs, key, name, cursor.offset):
        page.next_offset = None
    return page


def _at_end(blobs: BlobStore, key: str, name: str, offset: int) -> bool:
    size = blobs.size(key, name)
    return size is not None and offset >= size
