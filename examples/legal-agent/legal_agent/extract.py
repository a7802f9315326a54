"""Text out of the matter's files with the standard library: Markdown/text, .docx, .pdf.

.docx is a zip whose word/document.xml holds one <w:p> per paragraph. The world's PDFs keep their
content streams uncompressed (see the world's README), so a regular expression over `(...) Tj`
recovers the text; compressed (FlateDecode) streams are inflated with zlib when present.
Anything else (scans, images) has no text: `None`.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path
from xml.etree import ElementTree

TEXT_SUFFIXES = {".md", ".txt", ".text", ".markdown"}
W_NS = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
STREAM = re.compile(rb"<<(.*?)>>\s*stream\r?\n(.*?)\r?\nendstream", re.S)
# A text object: BT ... ET, where string literals are skipped whole so "(BETA)" does not end it.
BLOCK = re.compile(rb"(?<![A-Za-z])BT\b((?:\((?:\\.|[^\\)])*\)|[^()])*?)\bET\b", re.S)
SHOWN = re.compile(rb"\((?:\\.|[^\\)])*\)\s*(?:Tj|')|\[(?:[^\]]*)\]\s*TJ", re.S)
STRING = re.compile(rb"\(((?:\\.|[^\\)])*)\)", re.S)
ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def extract_text(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return path.read_text(encoding="utf-8", errors="replace")
    if suffix == ".docx":
        return docx_text(path)
    if suffix == ".pdf":
        return pdf_text(path.read_bytes())
    return None


def docx_text(path: Path) -> str:
    with zipfile.ZipFile(path) as archive:
        root = ElementTree.fromstring(archive.read("word/document.xml"))  # noqa: S314 - own files
    paragraphs = []
    for paragraph in root.iter(f"{W_NS}p"):
        text = "".join(node.text or "" for node in paragraph.iter(f"{W_NS}t"))
        if text.strip():
            paragraphs.append(text.strip())
    return "\n\n".join(paragraphs)


def pdf_text(data: bytes) -> str:
    """Paragraphs (BT..ET blocks) separated by blank lines, lines within a block by spaces."""
    paragraphs = []
    for header, body in STREAM.findall(data):
        if b"/FlateDecode" in header:
            try:
                body = zlib.decompress(body)
            except zlib.error:
                continue
        for block in BLOCK.findall(body):
            lines = [_decode(shown) for shown in SHOWN.findall(block)]
            text = " ".join(line for line in lines if line)
            if text.strip():
                paragraphs.append(" ".join(text.split()))
    return "\n\n".join(paragraphs)


def _decode(shown: bytes) -> str:
    return "".join(_unescape(s).decode("cp1252", errors="replace") for s in STRING.findall(shown))


def _unescape(raw: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(raw):
        byte = raw[i : i + 1]
        if byte != b"\\":
            out += byte
            i += 1
            continue
        nxt = raw[i + 1 : i + 2]
        octal = re.match(rb"[0-7]{1,3}", raw[i + 1 : i + 4])
        if octal:
            out.append(int(octal.group(), 8) & 0xFF)
            i += 1 + len(octal.group())
        else:
            out += ESCAPES.get(nxt, nxt)
            i += 2
    return bytes(out)
