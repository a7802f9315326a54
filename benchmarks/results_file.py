"""benchmarks/RESULTS.md: a script's section lives between `<!-- NAME:start -->` and
`<!-- NAME:end -->`, written whole by that script (`--write`), never by hand."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def write_section(name: str, text: str, results: Path = RESULTS) -> None:
    """Replace the section `name` (its markers included) with `text`, or append it."""
    start, end = markers(name)
    body = f"{start}\n{text.rstrip()}\n{end}"
    current = results.read_text() if results.is_file() else "# Benchmark results\n"
    if start in current and end in current:
        updated = current.split(start)[0] + body + current.split(end, 1)[1]
    else:
        updated = current.rstrip("\n") + "\n\n" + body + "\n"
    results.write_text(updated)
