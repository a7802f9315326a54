"""benchmarks/RESULTS.md: a script's section lives between `<!-- NAME:start -->` and
`<!-- NAME:end -->`, written whole by that script (`--write`), never by hand.

Each section ends with a digest line, `<!-- NAME:sha256 HEX -->`, over the text the script wrote;
benchmarks/results_check.py recomputes it, so an edit by hand between the markers is caught.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = re.compile(
    r"<!-- (?P<name>[\w-]+):start -->\n(?P<body>.*?)<!-- (?P=name):end -->", re.DOTALL
)
DIGEST = re.compile(r"\n?<!-- (?P<name>[\w-]+):sha256 (?P<hex>[0-9a-f]{64}) -->\n\Z")


@dataclass(frozen=True)
class Section:
    name: str
    text: str  # what the script wrote, without markers and digest line
    digest: str | None  # the digest line's value, None when the line is missing

    @property
    def intact(self) -> bool:
        return self.digest == digest(self.text)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()


def render(name: str, text: str) -> str:
    """The section as written into the file: markers, text, digest line."""
    start, end = markers(name)
    return f"{start}\n{text.strip()}\n<!-- {name}:sha256 {digest(text)} -->\n{end}"


def sections(document: str) -> list[Section]:
    """Every generated section of `document`, in order."""
    found = []
    for match in SECTION.finditer(document):
        body = match["body"]
        line = DIGEST.search(body)
        if line and line["name"] == match["name"]:
            found.append(Section(match["name"], body[: line.start()], line["hex"]))
        else:
            found.append(Section(match["name"], body, None))
    return found


def write_section(name: str, text: str, results: Path = RESULTS) -> None:
    """Replace the section `name` (its markers included) with `text`, or append it."""
    start, end = markers(name)
    body = render(name, text)
    current = results.read_text() if results.is_file() else "# Benchmark results\n"
    if start in current and end in current:
        updated = current.split(start)[0] + body + current.split(end, 1)[1]
    else:
        updated = current.rstrip("\n") + "\n\n" + body + "\n"
    results.write_text(updated)
