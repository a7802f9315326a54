"""benchmarks/results_check.py: the committed RESULTS.md passes, and each kind of hand edit fails.

Each test below edits a copy of the real file the way a person might (a figure between markers, a
summary that no longer matches its rows, a section without its "Not regenerated" note) and asserts
that the checker names the problem: the broken file each check catches."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def checker(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import results_check

    return results_check


@pytest.fixture
def document() -> str:
    return (BENCHMARKS / "RESULTS.md").read_text()


def test_the_committed_results_file_passes(checker: ModuleType, document: str) -> None:
    assert checker.check(document) == []


def test_a_figure_typed_between_markers_is_caught(checker: ModuleType, document: str) -> None:
    typed = re.search(r"after ÷ before = (\d+\.\d+)", document)
    assert typed is not None
    wrong = f"{float(typed.group(1)) + 0.11:.2f}"
    edited = document.replace(typed.group(0), f"after ÷ before = {wrong}")
    assert edited != document
    problems = checker.check(edited)
    assert any("before-after: edited by hand" in p for p in problems), problems


def test_a_section_without_its_digest_line_is_caught(checker: ModuleType, document: str) -> None:
    edited = re.sub(r"<!-- calibration:sha256 [0-9a-f]+ -->\n", "", document)
    assert any("calibration: no digest line" in p for p in checker.check(edited))


def test_a_summary_that_disagrees_with_its_rows_is_caught(
    checker: ModuleType, document: str
) -> None:
    """Re-signed by write_section, so only the re-derivation can catch it."""
    import results_file

    section = next(s for s in results_file.sections(document) if s.name == "calibration")
    said = re.search(r"(\d+) of (\d+) shapes meet", section.text)  # whatever the rows give
    assert said is not None
    met, shapes = int(said.group(1)), int(said.group(2))
    claimed = met - 1 if met == shapes else met + 1
    wrong = section.text.replace(said.group(0), f"{claimed} of {shapes} shapes meet")
    start, end = results_file.markers("calibration")
    old = document[document.index(start) : document.index(end) + len(end)]
    edited = document.replace(old, results_file.render("calibration", wrong))
    problems = checker.check(edited)
    assert problems == [f"calibration: the rows give '{met} of {shapes} shapes meet the goal', "
                        "the text does not say it"]  # fmt: skip


def test_rows_changed_under_a_derived_summary_are_caught(
    checker: ModuleType, document: str
) -> None:
    above = document[: document.index("<!-- orchestration-batches:start -->")]
    rows = re.findall(r"^\| (\d+) \| (\d+\.\d) s \|$", above, re.MULTILINE)
    assert rows  # the "further run" rows the summary is derived from, whatever their figures
    run, wall = rows[-1]
    # 30 s slower takes any of these runs past the summary's 60 s target
    edited = document.replace(f"| {run} | {wall} s |", f"| {run} | {float(wall) + 30:.1f} s |")
    assert edited != document
    assert any("orchestration-batches: not what the rows" in p for p in checker.check(edited))


def test_reliability_totals_and_summary_are_recomputed(checker: ModuleType) -> None:
    def section(lost_a: str, caught_b: str) -> str:
        return "\n".join(
            [
                "Run 2026-12-01: all tests passed.",
                "",
                "| fault injected | faults | completed | cells | lost | dup | wrong | ok | left |",
                "|---|---:|---:|---:|---:|---:|---:|---|---:|",
                f"| a | 1 | 1/1 | 20 | {lost_a} | 0 | 0 | yes | 0 |",
                "| b | 2 | 1/1 | 20 | 0 | 0 | 0 | yes | 0 |",
                "| **all** | 3 | 2/2 | 40 | 0 | 0 | 0 | | 0 |",
                "",
                "| check | broken build it catches | caught | reported |",
                "|---|---|---|---|",
                "| x | `EVALBOT_FAULT=x` | yes | — |",
                f"| y | `EVALBOT_FAULT=y` | {caught_b} | — |",
                "",
                "| hostile input | tried | reached | no handler | at the door | contained |",
                "|---|---:|---:|---:|---:|---:|",
                "| c | 5 | 2 | 1 | 2 | 5 |",
                "| d | 1 | — | — | — | 1 |",
                "| **all** | 6 | 2 | 1 | 2 | 6 |",
                "",
                "Summary: 0 results lost, 0 duplicated, 0 misclassified in 40 cells; 6 of 6 "
                "hostile inputs contained, 2 of them after reaching a handler and 2 rejected at "
                "the door; 2 of 2 checks caught their broken build.",
            ]
        )

    assert checker.reliability(section("0", "yes")) == []
    problems = checker.reliability(section("1", "yes"))
    assert "reliability: faults, column 5: the rows add up to 1, **all** says 0" in problems
    assert any("says all tests passed" in p for p in problems), problems
    problems = checker.reliability(section("0", "NO"))
    assert any("1 of 2 checks caught" in p for p in problems), problems


def test_figures_outside_markers_must_say_they_were_copied(
    checker: ModuleType, document: str
) -> None:
    edited = document.replace("## Ingestion (benchmarks/ingest.py)\n\n*", "## Ingestion\n\n*X")
    edited = re.sub(r"(## Ingestion\n\n\*X[^\n]*)Not regenerated", r"\1Regenerated", edited)
    assert any("'## Ingestion'" in p for p in checker.check(edited)), checker.check(edited)


def test_write_section_round_trips(checker: ModuleType, tmp_path: Path) -> None:
    import results_file

    results = tmp_path / "RESULTS.md"
    results_file.write_section("demo", "| a |\n|---|\n| 1 |", results)
    results_file.write_section("demo", "| a |\n|---|\n| 2 |", results)
    (section,) = results_file.sections(results.read_text())
    assert section.intact and "| 2 |" in section.text and "| 1 |" not in section.text


def test_a_named_before_after_section_is_rederived_too(checker: ModuleType, document: str) -> None:
    """`before_after.py --section before-after-local` writes a section of its own: checked alike."""
    import results_file

    engine = next(s for s in results_file.sections(document) if s.name == "before-after")
    named = document + "\n" + results_file.render("before-after-local", engine.text) + "\n"
    assert checker.check(named) == []
    typed = re.search(r"after ÷ before = (\d+\.\d+)", engine.text)
    assert typed is not None
    wrong = engine.text.replace(typed.group(0), f"after ÷ before = {float(typed[1]) + 0.11:.2f}")
    edited = document + "\n" + results_file.render("before-after-local", wrong) + "\n"
    problems = checker.check(edited)
    assert len(problems) == 1 and problems[0].startswith("before-after-local: the rows give")


def test_the_machine_cpu_summary_is_rederived(checker: ModuleType, document: str) -> None:
    """before_after.py's CPU column and its median line: written consistent, caught when a row
    changes under it."""
    import before_after
    import results_file

    runs = [
        before_after.Run("before", "aaaaaaa", 100.0, 6.3, 2000, 80.0),
        before_after.Run("after", "bbbbbbb", 99.0, 6.3, 2000, 70.0),
        before_after.Run("after", "bbbbbbb", 98.0, 6.3, 2000, 72.0),
        before_after.Run("before", "aaaaaaa", 101.0, 6.3, 2000, 84.0),
    ]
    text = before_after.section(runs, "aaaaaaa", ["--provider", "local"], "before-after-local")
    assert "before 82.0 ms, after 71.0 ms; after ÷ before = 0.87." in text
    written = document + "\n" + results_file.render("before-after-local", text) + "\n"
    assert checker.check(written) == []
    edited_rows = text.replace("| 84.0 ms |", "| 94.0 ms |")
    edited = document + "\n" + results_file.render("before-after-local", edited_rows) + "\n"
    problems = checker.check(edited)
    assert len(problems) == 1 and "before 87.0 ms, after 71.0 ms" in problems[0]


def test_the_summary_is_derived_from_the_rows_as_printed(
    checker: ModuleType, document: str
) -> None:
    """A median of unrounded figures can round differently from the median of the rows printed:
    56.205 and 67.48 print as 56.2 and 67.5, whose median prints as 61.9, while theirs prints
    as 61.8. The summary must be the rows' own, as the checker recomputes it (the figures of a
    written section that failed so)."""
    import before_after
    import results_file

    runs = [
        before_after.Run("before", "aaaaaaa", 73.0, 6.3, 2000, 56.20499999999993),
        before_after.Run("after", "bbbbbbb", 74.5, 6.3, 2000, 58.48),
        before_after.Run("after", "bbbbbbb", 78.7, 6.3, 2000, 61.905),
        before_after.Run("before", "aaaaaaa", 85.0, 6.3, 2000, 67.48000000000046),
    ]
    text = before_after.section(runs, "aaaaaaa", [], "before-after-process-io")
    written = document + "\n" + results_file.render("before-after-process-io", text) + "\n"
    assert checker.check(written) == []


def test_the_peers_summary_follows_the_peers_sections(checker: ModuleType, document: str) -> None:
    """Peers rows re-signed with other wall times (as a new peers.py run would write them) leave
    the cross-file-system summary stale; written again, the summary gives the new medians."""
    import results_file

    peers = next(s for s in results_file.sections(document) if s.name == "peers")
    row = re.compile(r"^\| evalbot `(process|local)` \| 2,000 \| (\d+\.\d) \|.*\| (\d+) \|$")
    process: dict[str, float] = {}
    faster: list[tuple[float, float]] = []  # (local, process) per round
    lines = []
    for line in peers.text.splitlines():
        found = row.match(line)
        if found and found[1] == "process":
            process[found[3]] = float(found[2])
        elif found:  # `local` at 1.2× `process` in its round: within the goal's ratio
            wall = round(process[found[3]] * 1.2, 1)
            faster.append((wall, process[found[3]]))
            line = line.replace(f"| {found[2]} |", f"| {wall} |", 1)
        lines.append(line)
    assert faster
    start, end = results_file.markers("peers")
    old = document[document.index(start) : document.index(end) + len(end)]
    edited = document.replace(old, results_file.render("peers", "\n".join(lines)))
    assert checker.check(edited) == [
        "peers-summary: not what the rows above it give (results_check.py --write)"
    ]
    summary = checker.peers_summary(checker.peers_readings(edited))
    wall = statistics.median(local for local, _ in faster)
    ratio = statistics.median(local / under for local, under in faster)
    assert f"| {wall:.1f} s |" in summary and f"| {ratio:.2f} |" in summary
    assert f"lowest {ratio:.2f} (peers, `local` {wall:.1f} s)" in summary


def test_the_peers_summary_counts_a_met_goal(checker: ModuleType) -> None:
    """Two made-up peers sections, one meeting both goals: the summary counts it and names it."""
    import results_file

    def section(folder: str, process: float, local: float, inspect: float) -> str:
        return "\n".join([
            f"2026-12-03 10:00 UTC; vm x86_64, 2 cores; commit abc; temporary folder {folder}",
            "",
            "| what | cells | wall s | cells/s |",
            "|---|---:|---:|---:|",
            f"| evalbot `process` | 2,000 | {process} | 1 |",
            f"| evalbot `local` | 2,000 | {local} | 1 |",
            f"| evalbot `process`, 2 workers | 2,000 | {process} | 1 |",
            f'| Inspect AI 0.3.285, `sandbox="local"` | 2,000 | {inspect} | 1 |',
        ])  # fmt: skip

    document = "\n".join([
        results_file.render("peers", section("/tmp", 40.0, 80.0, 30.0)),
        results_file.render("peers-fast", section("/dev/shm", 30.0, 39.0, 31.0)),
    ])  # fmt: skip
    lines = checker.peers_summary(checker.peers_readings(document)).splitlines()
    assert (
        "- `process` ÷ Inspect local (goal ≤ 1.00): met in 2 of 4 rows (one worker and per core); "
        "lowest 0.97 (peers-fast, one worker), highest 1.33 (peers, per core)"
    ) in lines
    assert (
        "- `local` ÷ `process` (goal ≤ 1.35 and ≤ 55 s): met in 1 of 2 runs; lowest 1.30 "
        "(peers-fast, `local` 39.0 s), highest 2.00 (peers, `local` 80.0 s)"
    ) in lines


def test_rounds_are_judged_on_the_median_of_each_rounds_ratio(checker: ModuleType) -> None:
    """peers.py --rounds 3 writes a round column; its goal line and the summary derived from its
    table agree on the median of the per-round ratios. The figures tell the wrong readings apart:
    ratio of the medians 1.11, last round 1.00, first 1.50; the median ratio is 1.33."""
    import peers
    import results_file

    rows = []
    for number, (process, inspect) in enumerate([(30.0, 20.0), (60.0, 45.0), (50.0, 50.0)], 1):
        rows.append(peers.Row("evalbot `process`", 2000, process, "-", "-", round=number))
        rows.append(peers.Row('Inspect AI 0.3.285, `sandbox="local"`', 2000, inspect, "-", "-",
                              round=number))  # fmt: skip
    header = "2026-12-04 10:00 UTC; vm x86_64, 2 cores; commit abc; temporary folder /tmp"
    text = peers.report(header, rows, [])
    assert ("- `process` ÷ Inspect local: 1.33 (median of 3 rounds: 1.50, 1.33, 1.00) "
            "(goal ≤ 1.00, every run durable): not met") in text.splitlines()  # fmt: skip
    [reading] = checker.peers_readings(results_file.render("peers", text))
    assert reading.ratio(checker.PROCESS, checker.INSPECT) == pytest.approx(60 / 45)
    assert reading.wall(checker.PROCESS) == 50.0
