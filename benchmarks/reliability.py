"""Reliability figures: run the fault and hostile-input tests and print the table.

Runs, with pytest, the fault tests (tests/chaos: worker SIGKILLs, Temporal dev server and
PostgreSQL restarts, judge and GitHub outages, each during a 200-cell experiment), the hostile
agents (tests/workflows/engine/test_hostile_more.py) and the hostile requests
(tests/bot/test_fuzz_*.py). Each test records what it measured (tests/chaos/record.py) before it
asserts, so a failing test still shows its numbers. Prints two Markdown tables — faults, and
hostile inputs — and exits non-zero when a test failed, a result was lost or duplicated, or an
input was not contained. `--write` also replaces the "## Reliability" section of
benchmarks/RESULTS.md (dated, with the machine). Usage:

    .venv/bin/python benchmarks/reliability.py [--write] [--log FILE (summarize only)]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
TESTS = [
    "tests/chaos",
    "tests/workflows/engine/test_hostile_more.py",
    "tests/bot/test_fuzz_grammar.py",
    "tests/bot/test_fuzz_webhook.py",
]
HEADING = "## Reliability"
NOTE = (
    "What the battery found and was fixed: activities without heartbeats stalled a cell for up to "
    "30 min after a worker crash; a 25 s database outage turned 50 scored cells into sandbox "
    "errors; "
    "`/eval bar --trials ²` and 5,000-digit trials were 503s; a body nested 1,000 deep reset the "
    "connection; shlex made a 5 MiB `/eval` line cost minutes. A worker killed mid-provision can "
    "still leave a sandbox no teardown names (the retried provision makes a new one); the tests "
    "tear those down and count them."
)


def run_tests(log: Path) -> tuple[int, float]:
    env = {**os.environ, "EVALBOT_RELIABILITY_LOG": str(log)}
    started = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    return done.returncode, time.perf_counter() - started


def read(log: Path) -> list[dict[str, Any]]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def fault_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| fault injected during the experiment | faults | experiments completed | cells | "
        "results lost | results duplicated | cells misclassified | PR comment correct | detail |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        comment = {True: "yes", False: "NO"}.get(row.get("comment_ok"), "—")
        detail = row.get("detail", "")
        if row.get("orphaned_sandboxes"):
            orphans = row["orphaned_sandboxes"]
            detail += f"; {orphans} sandboxes/uid claims orphaned by the fault, cleaned by the test"
        lines.append(
            f"| {row['name']} | {row['faults_injected']} | {row['completed']}/{row['experiments']}"
            f" | {row['cells']} | {row['lost']} | {row['duplicated']} | {row['misclassified']}"
            f" | {comment} | {detail} |"
        )
    total = {k: sum(r.get(k, 0) for r in rows) for k in ("faults_injected", "experiments",
             "completed", "cells", "lost", "duplicated", "misclassified")}  # fmt: skip
    lines.append(
        f"| **all** | {total['faults_injected']} | {total['completed']}/{total['experiments']} | "
        f"{total['cells']} | {total['lost']} | {total['duplicated']} | {total['misclassified']} |"
        " | |"
    )
    return lines


def hostile_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| hostile input | tried | contained | detail |", "|---|---:|---:|---|"]
    for row in rows:
        detail = row.get("detail") or "—"
        if isinstance(detail, list):
            detail = "; ".join(str(d) for d in detail)
        lines.append(f"| {row['name']} | {row['tried']} | {row['contained']} | {detail} |")
    tried = sum(r["tried"] for r in rows)
    contained = sum(r["contained"] for r in rows)
    lines.append(f"| **all** | {tried} | {contained} | |")
    return lines


def section(records: list[dict[str, Any]], status: int, seconds: float | None) -> str:
    faults = [r for r in records if r["kind"] == "fault"]
    hostile = [r for r in records if r["kind"] == "hostile"]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}"
    took = f" in {seconds / 60:.1f} min" if seconds is not None else ""
    verdict = "all tests passed" if status == 0 else f"pytest exit status {status}: SEE FAILURES"
    return "\n".join(
        [
            HEADING,
            "",
            "`make chaos` (= `.venv/bin/python benchmarks/reliability.py --write`) runs the fault "
            "tests (tests/chaos), the hostile agents (tests/workflows/engine/test_hostile_more.py) "
            "and the hostile requests (tests/bot/test_fuzz_*.py); every test records its figures "
            "before asserting. Each fault test runs a 200-cell experiment (10 cases × 2 arms × 10 "
            "trials, a trivial shell agent on the local provider, two cases failing on purpose) "
            "and checks every stored result against the status and score the agent earned.",
            "",
            f"Run {datetime.date.today().isoformat()} on {machine}{took}: {verdict}.",
            "",
            NOTE,
            "",
            *fault_table(faults),
            "",
            *hostile_table(hostile),
            "",
        ]
    )


def write(text: str) -> None:
    current = RESULTS.read_text() if RESULTS.is_file() else "# Benchmark results\n"
    if HEADING in current:
        head, _, rest = current.partition(HEADING)
        following = rest.find("\n## ")
        tail = rest[following + 1 :] if following >= 0 else ""
        updated = head + text + ("\n" + tail if tail else "")
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(updated)


def healthy(records: list[dict[str, Any]]) -> bool:
    faults = [r for r in records if r["kind"] == "fault"]
    hostile = [r for r in records if r["kind"] == "hostile"]
    return (
        bool(faults)
        and all(r["lost"] == r["duplicated"] == r["misclassified"] == 0 for r in faults)
        and all(r["completed"] == r["experiments"] for r in faults)
        and all(r["tried"] == r["contained"] for r in hostile)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--log", type=Path, help="summarize this log instead of running tests")
    options = parser.parse_args()
    if options.log:
        status, seconds, records = 0, None, read(options.log)
    else:
        with tempfile.TemporaryDirectory(prefix="evalbot-reliability-") as folder:
            log = Path(folder) / "reliability.jsonl"
            status, seconds = run_tests(log)
            records = read(log)
    text = section(records, status, seconds)
    print(text)
    if options.write:
        write(text)
        print(f"(written to {RESULTS.relative_to(ROOT)})")
    return 0 if status == 0 and healthy(records) else 1


if __name__ == "__main__":
    sys.exit(main())
