"""Check benchmarks/RESULTS.md without re-running a benchmark (`make results-check`).

- Every generated section (`<!-- NAME:start -->` … `<!-- NAME:end -->`) carries the digest line
  results_file.write_section wrote; an edit by hand between the markers changes the text and no
  longer matches it.
- The summary lines of a section are re-derived from the table rows of the same section (the
  "**all**" rows, medians, "N of M shapes"), so a summary that disagrees with its rows fails.
- A "## " section without generated markers holds figures copied by hand from a script's output;
  it must say so with "Not regenerated since YYYY-MM-DD".

`--write` rewrites the sections this script derives itself (the orchestration summary, from the
rows above it). Usage:

    .venv/bin/python benchmarks/results_check.py [--write] [FILE]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from results_file import RESULTS, Section, markers, sections, write_section

HAND_COPIED = re.compile(r"Not regenerated since \d{4}-\d{2}-\d{2}")
BATCHES = "orchestration-batches"  # the summary this script derives (see `batches_summary`)


def table_rows(text: str, header_starts: str) -> list[list[str]]:
    """The cells of the table whose header row starts with `| header_starts`."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(f"| {header_starts}"):
            rows = []
            for row in lines[index + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
            return rows
    return []


def number(cell: str) -> float:
    found = re.search(r"-?[\d,]+(?:\.\d+)?", cell)
    if found is None:
        raise ValueError(f"no number in {cell!r}")
    return float(found.group().replace(",", ""))


def expect(problems: list[str], section: str, wanted: str, text: str) -> None:
    if wanted not in text:
        problems.append(f"{section}: the rows give {wanted!r}, the text does not say it")


# -- per-section summaries --------------------------------------------------------------------


def count(cell: str) -> int:
    """A table cell as a count ("—" and text count as 0)."""
    return int(cell) if re.fullmatch(r"\d+", cell) else 0


def totals(problems: list[str], name: str, rows: list[list[str]]) -> list[list[str]]:
    """Check the "**all**" row against the sum of the rows above it; returns those rows."""
    body = [r for r in rows if r[0] != "**all**"]
    total = [r for r in rows if r[0] == "**all**"]
    if not body or len(total) != 1:
        problems.append(f"reliability: the {name} table has no rows or no single **all** row")
        return body
    for column, cell in enumerate(total[0]):
        if column and re.fullmatch(r"\d+", cell):
            summed = sum(count(r[column]) for r in body)
            if summed != int(cell):
                problems.append(
                    f"reliability: {name}, column {column + 1}: the rows add up to {summed}, "
                    f"**all** says {cell}"
                )
    return body


def reliability(text: str) -> list[str]:
    """The "**all**" rows are the sums of the rows above them; the summary line and the verdict
    follow from the rows."""
    problems: list[str] = []
    faults = totals(problems, "faults", table_rows(text, "fault injected"))
    hostile = totals(problems, "hostile inputs", table_rows(text, "hostile input"))
    checks = table_rows(text, "check")
    lost, duplicated, wrong, cells = (sum(count(r[i]) for r in faults) for i in (4, 5, 6, 3))
    tried, reached, rejected, contained = (sum(count(r[i]) for r in hostile) for i in (1, 2, 4, 5))
    caught = sum(r[2] == "yes" for r in checks)
    expect(problems, "reliability", (
        f"Summary: {lost} results lost, {duplicated} duplicated, {wrong} misclassified in "
        f"{cells} cells; {contained} of {tried} hostile inputs contained, {reached} of them after "
        f"reaching a handler and {rejected} rejected at the door; {caught} of {len(checks)} "
        "checks caught their broken build."
    ), text)  # fmt: skip
    healthy = lost == duplicated == wrong == 0 and contained == tried and caught == len(checks)
    if "all tests passed" in text and not (healthy and checks):
        problems.append("reliability: says all tests passed, but the rows show a failure")
    return problems


def calibration(text: str) -> list[str]:
    rows = table_rows(text, "shape")
    if not rows:
        return ["calibration: no table"]
    goals = [r[-1] for r in rows]
    problems: list[str] = []
    met, close, missed = goals.count("yes"), goals.count("within sampling error"), goals.count("NO")
    expect(problems, "calibration", f"{met} of {len(rows)} shapes meet the goal", text)
    expect(problems, "calibration", f"{close} within sampling error, {missed} miss it", text)
    worst_fp = max(rows, key=lambda r: number(r[4]))
    worst_cov = min(rows, key=lambda r: number(r[6]))
    fp, cov = worst_fp[4].split()[0], worst_cov[6].split()[0]
    expect(problems, "calibration", f"Highest false-positive rate: {fp} ({worst_fp[0]})", text)
    expect(problems, "calibration", f"lowest coverage: {cov} ({worst_cov[0]})", text)
    return problems


def before_after(text: str) -> list[str]:
    rows = table_rows(text, "run")
    walls = {
        side: statistics.median(number(r[3]) for r in rows if r[1] == side)
        for side in ("before", "after")
        if any(r[1] == side for r in rows)
    }
    if set(walls) != {"before", "after"}:
        return ["before-after: the table lacks a side"]
    problems: list[str] = []
    wanted = (
        f"Median wall time: before {walls['before']:.1f} s, after {walls['after']:.1f} s; "
        f"after ÷ before = {walls['after'] / walls['before']:.2f}."
    )
    expect(problems, "before-after", wanted, text)
    if rows and len(rows[0]) > 6:  # sections written before the CPU column lack it
        cpu = {
            side: statistics.median(number(r[6]) for r in rows if r[1] == side)
            for side in ("before", "after")
        }
        wanted = (
            f"before {cpu['before']:.1f} ms, after {cpu['after']:.1f} ms; "
            f"after ÷ before = {cpu['after'] / cpu['before']:.2f}."
        )
        expect(problems, "before-after", wanted, text)
    return problems


SUMMARIES: dict[str, Callable[[str], list[str]]] = {
    "reliability": reliability,
    "calibration": calibration,
    "before-after": before_after,
}


def summary_of(name: str) -> Callable[[str], list[str]]:
    """The re-derivation for a section; `before-after-*` (before_after.py --section) as
    `before-after`."""
    if name.startswith("before-after-"):
        return lambda text: [p.replace("before-after", name, 1) for p in before_after(text)]
    return SUMMARIES.get(name, lambda _: [])


# -- the orchestration summary (derived here, from the hand-copied rows above it) -------------


def batches_summary(document: str) -> str:
    """Session 4's summary table, from its rows: the `--floor` runs and the further runs."""
    start = document.index("### Session 4")
    end = document.index(markers(BATCHES)[0], start)
    rows = table_rows(document[start:end], "date")
    more = table_rows(document[start:end], "further run")
    walls = [number(r[3]) for r in rows] + [number(r[1]) for r in more]
    ratios = [number(r[-1]) for r in rows if r[-1] != "—"]
    events = [number(r[5]) for r in rows]
    faster = sum(ratio > 1 for ratio in ratios)
    under = sum(wall < 60 for wall in walls)
    return "\n".join(
        [
            "**Summary** (derived from the rows above by `benchmarks/results_check.py --write`)",
            "",
            "| | result |",
            "|---|---|",
            f"| the 60 s target | met in {under} of {len(walls)} runs: {min(walls):.1f}–"
            f"{max(walls):.1f} s, median {statistics.median(walls):.1f} s |",
            f"| against the naive design, same run | {min(ratios):.2f}–{max(ratios):.2f}× faster, "
            f"in {faster} of {len(ratios)} runs |",
            f"| history events per cell | {min(events):.1f}–{max(events):.1f} |",
        ]
    )


# -- the peers summary (derived here, from the peers.py sections) -------------------------------

PEERS_SUMMARY = "peers-summary"
PEERS_SECTION = re.compile(r"peers(-[\w-]+)?")


@dataclass(frozen=True)
class PeersReading:
    """One peers.py section: when, on which temporary folder, and its rows' wall times by round
    (sections written before `--rounds` have one round)."""

    name: str
    when: str
    folder: str
    walls: dict[str, dict[int, float]]  # row name -> round -> wall s

    def _rounds(self, kind: str) -> dict[int, float]:
        return next((w for row, w in self.walls.items() if PEERS_ROWS[kind](row)), {})

    def wall(self, kind: str) -> float | None:
        """The median wall time of this kind of row over the rounds."""
        walls = self._rounds(kind)
        return statistics.median(walls.values()) if walls else None

    def ratios(self, top: str, bottom: str) -> list[float]:
        """`top` ÷ `bottom` within each round that has both, in round order."""
        over, under = self._rounds(top), self._rounds(bottom)
        return [over[n] / under[n] for n in sorted(over.keys() & under.keys()) if under[n]]

    def ratio(self, top: str, bottom: str) -> float | None:
        """The median of the per-round ratios: what peers.py judges a goal on."""
        ratios = self.ratios(top, bottom)
        return statistics.median(ratios) if ratios else None


def peers_readings(document: str) -> list[PeersReading]:
    readings = []
    for section in sections(document):
        if section.name == PEERS_SUMMARY or not PEERS_SECTION.fullmatch(section.name):
            continue
        header = re.search(r"^(\d{4}-\d\d-\d\d \d\d:\d\d UTC);.*temporary folder (.+)$",
                           section.text, re.MULTILINE)  # fmt: skip
        rows = table_rows(section.text, "what")
        if header and rows:
            walls: dict[str, dict[int, float]] = {}
            for row in rows:  # what | cells | wall s | ... | notes [| round]
                round_number = int(row[9]) if len(row) > 9 else 1
                walls.setdefault(row[0], {})[round_number] = number(row[2])
            readings.append(PeersReading(section.name, header[1], header[2], walls))
    return readings


PROCESS, PER_CORE, LOCAL, INSPECT = "process", "per core", "local", "Inspect local"
PEERS_ROWS: dict[str, Callable[[str], bool]] = {  # peers.py's row names
    PROCESS: lambda row: row == "evalbot `process`",
    PER_CORE: lambda row: row.startswith("evalbot `process`, "),
    LOCAL: lambda row: row == "evalbot `local`",
    INSPECT: lambda row: row.startswith("Inspect AI") and 'sandbox="local"' in row,
}


def peers_summary(readings: list[PeersReading]) -> str:
    """One row per peers.py section, and for each of issue 24's goals how many readings meet it
    and its lowest and highest reading."""

    def cell(value: float | None, unit: str = "") -> str:
        return "—" if value is None else f"{value:.{1 if unit else 2}f}{unit}"

    lines = [
        "**Across file systems** (derived from the peers sections above by "
        "`benchmarks/results_check.py --write`; a section of several rounds gives the median "
        "wall times, and the median of the ratios within each round)",
        "",
        "| section | run | temporary folder | `process` | `process`, per core | `local` "
        "| Inspect local | `process` ÷ Inspect | per core ÷ Inspect | `local` ÷ `process` |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in readings:
        lines.append(
            f"| {r.name} | {r.when} | {r.folder} | {cell(r.wall(PROCESS), ' s')} "
            f"| {cell(r.wall(PER_CORE), ' s')} | {cell(r.wall(LOCAL), ' s')} "
            f"| {cell(r.wall(INSPECT), ' s')} | {cell(r.ratio(PROCESS, INSPECT))} "
            f"| {cell(r.ratio(PER_CORE, INSPECT))} | {cell(r.ratio(LOCAL, PROCESS))} |"
        )
    lines += ["", *peers_goal_lines(readings)]
    return "\n".join(lines)


def peers_goal_lines(readings: list[PeersReading]) -> list[str]:
    """In how many readings each goal is met, and its lowest and highest reading."""
    durable = [
        (ratio, f"{r.name}, {label}")
        for r in readings
        for label, top in (("one worker", PROCESS), ("per core", PER_CORE))
        if (ratio := r.ratio(top, INSPECT)) is not None
    ]
    isolated = [
        (ratio, wall, r.name)
        for r in readings
        if (ratio := r.ratio(LOCAL, PROCESS)) is not None and (wall := r.wall(LOCAL))
    ]
    lines = []
    if durable:
        (best, best_at), (worst, worst_at) = min(durable), max(durable)
        met = sum(ratio <= 1.0 for ratio, _ in durable)
        lines.append(
            f"- `process` ÷ Inspect local (goal ≤ 1.00): met in {met} of {len(durable)} rows "
            f"(one worker and per core); lowest {best:.2f} ({best_at}), highest {worst:.2f} "
            f"({worst_at})"
        )
    if isolated:
        met = sum(ratio <= 1.35 and wall <= 55 for ratio, wall, _ in isolated)
        ends = [
            f"{word} {ratio:.2f} ({where}, `local` {wall:.1f} s)"
            for word, (ratio, wall, where) in (
                ("lowest", min(isolated)),
                ("highest", max(isolated)),
            )
        ]
        lines.append(
            f"- `local` ÷ `process` (goal ≤ 1.35 and ≤ 55 s): met in {met} of {len(isolated)} "
            f"runs; {', '.join(ends)}"
        )
    return lines


def derived(document: str) -> dict[str, str]:
    found = {}
    if "### Session 4" in document:
        found[BATCHES] = batches_summary(document)
    if readings := peers_readings(document):
        found[PEERS_SUMMARY] = peers_summary(readings)
    return found


# -- the checks -------------------------------------------------------------------------------


def unmarked_sections(document: str) -> list[str]:
    """The "## " sections outside generated markers that do not say they were copied by hand."""
    outside = document
    for section in sections(document):
        start, end = markers(section.name)
        outside = outside.replace(outside[outside.find(start) : outside.find(end) + len(end)], "")
    problems = []
    for chunk in re.split(r"\n(?=## )", outside)[1:]:
        title = chunk.splitlines()[0]
        if re.search(r"\d", chunk.split("\n", 1)[-1]) and not HAND_COPIED.search(chunk):
            problems.append(f"{title!r}: figures outside generated markers, no 'Not regenerated'")
    return problems


def check(document: str) -> list[str]:
    problems: list[str] = []
    found: list[Section] = sections(document)
    for section in found:
        if section.digest is None:
            problems.append(f"{section.name}: no digest line (not written by write_section)")
        elif not section.intact:
            problems.append(f"{section.name}: edited by hand (its digest does not match)")
        problems += summary_of(section.name)(section.text)
    by_name = {s.name: s for s in found}
    for name, text in derived(document).items():
        if name not in by_name or by_name[name].text.strip() != text.strip():
            problems.append(f"{name}: not what the rows above it give (results_check.py --write)")
    return problems + unmarked_sections(document)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=RESULTS)
    parser.add_argument("--write", action="store_true", help="rewrite the derived sections")
    options = parser.parse_args()
    if options.write:
        for name, text in derived(options.file.read_text()).items():
            write_section(name, text, options.file)
    problems = check(options.file.read_text())
    for problem in problems:
        print(problem)
    print(f"{options.file.name}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
