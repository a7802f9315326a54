"""Split a document into clause-sized chunks that remember their clause number and heading."""

from __future__ import annotations

import re
from dataclasses import dataclass

from legal_agent.corpus import Document

CLAUSE_START = re.compile(r"^\s*(?:#+\s*)?(\d{1,2}(?:\.\d{1,2})+|\d{1,2}(?=\.))\.?\s+(?=\S)")
HEADING = re.compile(r"^\s*(?:#+\s*)?(\d{1,2})\.\s+([A-Z][A-Za-z ,&'()-]{2,60})\s*$")
TITLE = re.compile(r"^\s*#\s+(.+)$")
MAX_WORDS = 220


@dataclass(frozen=True)
class Chunk:
    doc: Document
    index: int
    clause: str | None  # "18.2"
    heading: str  # "Assignment and change of control"
    text: str

    @property
    def path(self) -> str:
        return self.doc.path

    @property
    def label(self) -> str:
        return f"clause {self.clause}" if self.clause else "preamble"

    @property
    def full_text(self) -> str:
        """Heading and text: what retrieval and topic detection look at."""
        return f"{self.heading}. {self.text}" if self.heading else self.text


def split(doc: Document) -> list[Chunk]:
    if not doc.text:
        return []
    chunks: list[Chunk] = []
    heading = ""
    for block in _blocks(doc.text):
        first = block.splitlines()[0]
        heading_match = HEADING.match(first) if len(block.splitlines()) == 1 else None
        if heading_match and not _is_sentence(heading_match.group(2)):
            heading = heading_match.group(2).strip().capitalize()
            continue
        if TITLE.match(first) and len(block.splitlines()) == 1:
            continue
        clause = CLAUSE_START.match(first)
        text = _flatten(block.replace("**", ""))
        if clause:
            text = text[len(clause.group(0).strip()) :].strip() if text else text
        for piece in _limit(text):
            number = clause.group(1) if clause else None
            chunks.append(Chunk(doc, len(chunks), number, heading if clause else "", piece))
    return chunks


def _blocks(text: str) -> list[str]:
    """Paragraphs, further split where a line starts a new numbered clause."""
    blocks: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        current: list[str] = []
        for line in paragraph.splitlines():
            if current and (CLAUSE_START.match(line) or HEADING.match(line)):
                blocks.append("\n".join(current))
                current = []
            if line.strip():
                current.append(line)
        if current:
            blocks.append("\n".join(current))
    return blocks


def _flatten(block: str) -> str:
    """One line of text; an address block (several short lines) keeps its lines as commas."""
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    if len(lines) >= 3 and all(len(line) <= 40 and not line.endswith(".") for line in lines):
        return ", ".join(lines)
    return " ".join(" ".join(lines).split())


def _is_sentence(text: str) -> bool:
    return text.rstrip().endswith((".", ":", ";")) or len(text.split()) > 8


def _limit(text: str) -> list[str]:
    words = text.split()
    if len(words) <= MAX_WORDS:
        return [text] if text else []
    return [" ".join(words[i : i + MAX_WORDS]) for i in range(0, len(words), MAX_WORDS)]
