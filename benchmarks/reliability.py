"""Reliability figures: run the fault and hostile-input tests and print the table.

Runs, with pytest, the fault tests (tests/chaos: worker SIGKILLs, Temporal dev server and
PostgreSQL restarts, judge and GitHub outages, each during a 200-cell experiment), their mutation
checks (tests/chaos/test_mutations.py: each check against a build broken on purpose with
EVALBOT_FAULT), the hostile agents (tests/workflows/engine/test_hostile_more.py) and the hostile
requests (tests/bot/test_fuzz_*.py). Each test records what it measured (tests/chaos/record.py)
before it asserts, so a failing test still shows its numbers. Prints three Markdown tables —
faults, checks with the broken build each catches, hostile inputs (split into those that reached
a handler and those rejected at the door) — and exits non-zero when a test failed, a result was
lost or duplicated, an input was not contained or a check missed its broken build. `--write`
also replaces the "reliability" section of benchmarks/RESULTS.md (results_file.write_section).
`--trials N` runs the fault experiments with N trials (20·N cells) instead of 10: a reduced
configuration, said so in the section. Usage:

    .venv/bin/python benchmarks/reliability.py [--write] [--trials N] [--keep-log FILE]
    .venv/bin/python benchmarks/reliability.py --log FILE --pytest-output FILE.pytest.txt [--write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_figures import host_and_load
from results_file import RESULTS, markers, render, write_section

ROOT = Path(__file__).resolve().parents[1]
SECTION = "reliability"  # its markers in RESULTS.md (results_file.py)
FULL_TRIALS = 10
TESTS = [
    "tests/chaos",
    "tests/workflows/engine/test_hostile_more.py",
    "tests/bot/test_fuzz_grammar.py",
    "tests/bot/test_fuzz_webhook.py",
]
NOTE = (
    "What the battery found and was fixed: activities without heartbeats stalled a cell for up to "
    "30 min after a worker crash; a 25 s database outage turned 50 scored cells into sandbox "
    "errors; `/eval bar --trials ²` and 5,000-digit trials were 503s; a body nested 1,000 deep "
    "reset the connection; shlex made a 5 MiB `/eval` line cost minutes. Once the fuzz was signed "
    "and reached the handlers (2026-12-01): a `comment` or `pull_request` of the wrong type, a "
    "non-numeric or negative id, a repository name that is not owner/name and a login that is "
    "not a GitHub login were 503s, replies to `/repos/[]/…` or API paths built from garbage; a "
    "lone surrogate escape (valid JSON, not text) crashed the response. They are 400s naming the "
    "field, and a GitHub 404 for the installation is a 422, not a 503 asking for a redelivery. A "
    "worker killed mid-provision can still leave a sandbox no teardown names (the retried "
    "provision makes a new one): the snapshot before the test's clean-up counts those, and only "
    "the worker-kill test tolerates them (bounded by kills × run slots)."
)


def run_tests(log: Path, trials: int) -> str:
    """Run the battery; returns pytest's output (also shown as it comes)."""
    env = {**os.environ, "EVALBOT_RELIABILITY_LOG": str(log), "EVALBOT_CHAOS_TRIALS": str(trials)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    lines = []
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    return "".join(lines)


@dataclass(frozen=True)
class Verdict:
    """What pytest's output says: its summary line and the tests it names as failed."""

    known: bool
    failed: list[str]
    seconds: float | None

    @classmethod
    def of(cls, output: str | None) -> Verdict:
        if output is None:
            return cls(False, [], None)
        summary = re.findall(
            r"^=*\s*(.*\b(?:passed|failed|error)\b.* in ([\d.]+)s.*)$", output, re.M
        )
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
        if not summary:
            return cls(False, failed, None)
        line, seconds = summary[-1]
        broken = failed or re.search(r"\d+ (?:failed|errors?)\b", line)
        return cls(True, failed or ([line] if broken else []), float(seconds))

    def text(self) -> str:
        if not self.known:
            return "pytest's outcome not known (no summary line): SEE FAILURES"
        if not self.failed:
            return "all tests passed"
        return f"{len(self.failed)} test(s) FAILED: " + ", ".join(f"`{f}`" for f in self.failed)


def read(log: Path) -> list[dict[str, Any]]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _text(detail: Any) -> str:
    if isinstance(detail, list):
        detail = "; ".join(str(d) for d in detail)
    return str(detail or "—").replace("|", "\\|").replace("\n", " ")


def fault_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| fault injected during the experiment | faults | experiments completed | cells | "
        "results lost | results duplicated | cells misclassified | PR comment correct | "
        "left on the host before clean-up | detail |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for row in rows:
        comment = {True: "yes", False: "NO"}.get(row.get("comment_ok"), "—")
        detail = _text(row.get("detail"))
        if row.get("orphaned_sandboxes"):
            detail += f"; the test's clean-up then removed {row['orphaned_sandboxes']} items"
        lines.append(
            f"| {row['name']} | {row['faults_injected']} | {row['completed']}/{row['experiments']}"
            f" | {row['cells']} | {row['lost']} | {row['duplicated']} | {row['misclassified']}"
            f" | {comment} | {row.get('left_before_cleanup', 0)} | {detail} |"
        )
    keys = ("faults_injected", "completed", "experiments", "cells", "lost", "duplicated",
            "misclassified", "left_before_cleanup")  # fmt: skip
    total = {k: sum(r.get(k, 0) for r in rows) for k in keys}
    lines.append(
        f"| **all** | {total['faults_injected']} | {total['completed']}/{total['experiments']} | "
        f"{total['cells']} | {total['lost']} | {total['duplicated']} | {total['misclassified']} |"
        f" | {total['left_before_cleanup']} | |"
    )
    return lines


def mutation_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| check | broken build it catches | caught | what the check reported |",
        "|---|---|---|---|",
    ]
    for row in rows:
        caught = "yes" if row.get("caught") else "NO"
        lines.append(
            f"| {row['name']} | `{row['fault']}` | {caught} | {_text(row.get('detail'))[:160]} |"
        )
    return lines


def hostile_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| hostile input | tried | reached a handler | signed, no handler acts on it | "
        "rejected at the door | contained | detail |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    split = ("reached_handler", "no_handler", "rejected_at_door")
    for row in rows:
        cells = [str(row[k]) if k in row else "—" for k in split]
        lines.append(
            f"| {row['name']} | {row['tried']} | {' | '.join(cells)} | {row['contained']} | "
            f"{_text(row.get('detail'))} |"
        )
    total = {k: sum(r.get(k, 0) for r in rows) for k in ("tried", "contained", *split)}
    lines.append(
        f"| **all** | {total['tried']} | {total['reached_handler']} | {total['no_handler']} | "
        f"{total['rejected_at_door']} | {total['contained']} | |"
    )
    return lines


def summary(records: list[dict[str, Any]]) -> str:
    """One line, re-derived from the tables' rows by benchmarks/results_check.py."""
    faults = [r for r in records if r["kind"] == "fault"]
    hostile = [r for r in records if r["kind"] == "hostile"]
    mutations = [r for r in records if r["kind"] == "mutation"]
    return (
        f"Summary: {sum(r['lost'] for r in faults)} results lost, "
        f"{sum(r['duplicated'] for r in faults)} duplicated, "
        f"{sum(r['misclassified'] for r in faults)} misclassified in "
        f"{sum(r['cells'] for r in faults)} cells; "
        f"{sum(r['contained'] for r in hostile)} of {sum(r['tried'] for r in hostile)} hostile "
        f"inputs contained, {sum(r.get('reached_handler', 0) for r in hostile)} of them after "
        f"reaching a handler and {sum(r.get('rejected_at_door', 0) for r in hostile)} rejected "
        f"at the door; {sum(bool(r.get('caught')) for r in mutations)} of {len(mutations)} "
        "checks caught their broken build."
    )


def section(
    records: list[dict[str, Any]], verdict: Verdict, trials: int, *, from_log: bool = False
) -> str:
    faults = [r for r in records if r["kind"] == "fault"]
    hostile = [r for r in records if r["kind"] == "hostile"]
    mutations = [r for r in records if r["kind"] == "mutation"]
    machine = host_and_load()
    took = f" in {verdict.seconds / 60:.1f} min" if verdict.seconds is not None else ""
    if from_log:
        machine += " when summarized from the run's log and pytest output (`--log`)"
    cells = 10 * 2 * trials
    reduced = (
        f" **Reduced configuration**: `--trials {trials}`, so each fault experiment has {cells} "
        f"cells instead of {10 * 2 * FULL_TRIALS} (the full battery takes more than 5 minutes "
        "on this shared machine)."
        if trials != FULL_TRIALS
        else ""
    )
    return "\n".join(
        [
            "## Reliability",
            "",
            "`make chaos` (= `.venv/bin/python benchmarks/reliability.py --write`) runs the fault"
            " tests (tests/chaos), their mutation checks (tests/chaos/test_mutations.py), the "
            "hostile agents (tests/workflows/engine/test_hostile_more.py) and the hostile "
            "requests (tests/bot/test_fuzz_*.py); every test records its figures before "
            f"asserting. Each fault test runs an experiment of {cells} cells (10 cases × 2 arms × "
            f"{trials} trials, a trivial shell agent on the local provider, two cases failing on "
            "purpose) and checks every stored result against the status and score the agent "
            "earned. Duplicates are counted in Temporal history (result-producing activity "
            "completions per cell, and run workflows started twice) and in the fake GitHub's "
            "request log (sticky comments and check runs created more than once), not in the "
            "store, whose key keeps one row per cell. What is left on the host (processes, "
            "mounts, cgroups, sandboxes, uid claims, blob staging) is snapshotted before the "
            "test's own clean-up." + reduced,
            "",
            f"Run {datetime.date.today().isoformat()} on {machine}{took}: {verdict.text()}.",
            "",
            NOTE,
            "",
            *fault_table(faults),
            "",
            "Each check above, and each webhook check below, against a build broken on purpose "
            "(`EVALBOT_FAULT`, workflows/faults.py, or a test-only monkeypatch of one function):",
            "",
            *mutation_table(mutations),
            "",
            "Hostile inputs. Webhook fuzz cases are signed with the webhook secret, so they pass "
            "the signature check and reach the handlers, the `/eval` parser, the planner and the "
            "GitHub client (a spy on `Router.run` counts those); the unsigned set must stop at the "
            "door (401). Contained: no 5xx, no GitHub request beyond reads and polite replies, "
            "nothing started that the unmutated payloads would not start.",
            "",
            *hostile_table(hostile),
            "",
            summary(records),
        ]
    )


def write(text: str) -> None:
    """Into the reliability markers; the first time, in place of the old unmarked section."""
    current = RESULTS.read_text() if RESULTS.is_file() else "# Benchmark results\n"
    heading = "## Reliability\n"
    if markers(SECTION)[0] not in current and heading in current:
        head, _, rest = current.partition(heading)
        following = rest.find("\n## ")
        tail = rest[following + 1 :] if following >= 0 else ""
        RESULTS.write_text(head + render(SECTION, "(placeholder)") + "\n\n" + tail)
    write_section(SECTION, text)


def healthy(records: list[dict[str, Any]]) -> bool:
    faults = [r for r in records if r["kind"] == "fault"]
    hostile = [r for r in records if r["kind"] == "hostile"]
    mutations = [r for r in records if r["kind"] == "mutation"]
    return (
        bool(faults)
        and all(r["lost"] == r["duplicated"] == r["misclassified"] == 0 for r in faults)
        and all(r["completed"] == r["experiments"] for r in faults)
        and all(r["tried"] == r["contained"] for r in hostile)
        and bool(mutations)
        and all(r.get("caught") for r in mutations)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--trials", type=int, default=FULL_TRIALS, help="trials per fault test")
    parser.add_argument("--log", type=Path, help="summarize this log instead of running tests")
    parser.add_argument("--pytest-output", type=Path, help="with --log: that run's pytest output")
    parser.add_argument("--keep-log", type=Path, help="keep the run's log here (and its pytest "
                        "output beside it, .pytest.txt)")  # fmt: skip
    options = parser.parse_args()
    if options.log:
        output = options.pytest_output.read_text() if options.pytest_output else None
        records = read(options.log)
    else:
        with tempfile.TemporaryDirectory(prefix="evalbot-reliability-") as folder:
            log = Path(folder) / "reliability.jsonl"
            output = run_tests(log, options.trials)
            records = read(log)
            if options.keep_log:
                options.keep_log.write_text(log.read_text() if log.is_file() else "")
                options.keep_log.with_suffix(".pytest.txt").write_text(output)
    verdict = Verdict.of(output)
    text = section(records, verdict, options.trials, from_log=options.log is not None)
    print(text)
    if options.write:
        write(text)
        print(f"(written to {RESULTS.relative_to(ROOT)})")
    return 0 if verdict.known and not verdict.failed and healthy(records) else 1


if __name__ == "__main__":
    sys.exit(main())
